"""Published figures beside this study's matching cells: table, section and figure (fwbench.analysis.published:
sources, matching, figure; the section in its template's words: fwbench.analysis.paper.published_section)."""

from pathlib import Path

from fwbench.analysis.inference.tidy import read_tidy
from fwbench.analysis.paper.published_section import published_section
from fwbench.analysis.published.figure import published_figure
from fwbench.analysis.published.matching import compare
from fwbench.analysis.published.sources import read_sources
from fwbench.io import atomic_write_text
from fwbench.results import read_cell_index
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    margin = float(snakemake.params.margin)  # analysis.equivalence_margin
    sources = read_sources(snakemake.input.sources)
    rows = compare(
        sources,
        inference=read_tidy(snakemake.input.inference),
        speedups=read_tidy(snakemake.input.speedups),
        training=read_tidy(snakemake.input.training[0]) if snakemake.input.training else None,
        image_size=snakemake.params.image_size,
        cell_paths=read_cell_index(list(snakemake.input.cells)),
        margin=margin,
    )
    atomic_write_text(snakemake.output.csv, rows.to_csv(index=False))
    published_figure(rows, snakemake.output.pdf, snakemake.output.png)
    atomic_write_text(
        snakemake.output.section, published_section(rows, sources, Path(snakemake.output.pdf).stem, margin)
    )
    print(rows.to_string())
