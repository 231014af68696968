from fwbench.analysis.aggregate import write_speedups, write_tidy
from fwbench.logs import redirect_to

with redirect_to(snakemake.log[0]):
    frame = write_tidy(snakemake.input, snakemake.output.csv)
    print(frame["status"].value_counts().to_dict())
    print(write_speedups(snakemake.input, snakemake.output.speedups).to_string())
