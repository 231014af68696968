from fwbench.analysis.inference.ratios import write_ratio_tables
from fwbench.analysis.inference.tidy import write_tidy
from fwbench.io import read_json
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    facts = [row for path in snakemake.input.facts for row in read_json(path)]
    frame = write_tidy(snakemake.input.cells, snakemake.output.csv, facts=facts, peak=read_json(snakemake.input.peak))
    print(frame["status"].value_counts().to_dict())
    ratios, gains = write_ratio_tables(
        snakemake.input.cells,
        snakemake.output.speedups,
        snakemake.output.mode_gains,
        ratio_modes=snakemake.params.ratio_modes,
        analysis=snakemake.params.analysis,
    )
    print(ratios.to_string())
    print(gains.to_string())
