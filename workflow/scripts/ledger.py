"""The fairness ledger from the cells' own records and the study's parity table (fwbench.analysis.fairness.ledger), and
its section in its template's words (fwbench.analysis.paper.ledger_section)."""

from fwbench.analysis.fairness.ledger import ledger
from fwbench.analysis.inference.tidy import read_tidy
from fwbench.analysis.paper.ledger_section import ledger_section
from fwbench.io import atomic_write_text
from fwbench.results import load_result, read_cell_index
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    rows = ledger(
        (load_result(path) for path in read_cell_index(list(snakemake.input.cells))),
        read_tidy(snakemake.input.parity),
        read_tidy(snakemake.input.inference),
        speedups=read_tidy(snakemake.input.speedups),
        config={"ratio_modes": snakemake.params.ratio_modes},
    )
    atomic_write_text(snakemake.output.csv, rows.to_csv(index=False))
    atomic_write_text(snakemake.output.section, ledger_section(rows))
    print(rows.to_string())
