from fwbench.analysis.inference.figures import throughput_figure
from fwbench.analysis.inference.tidy import read_tidy
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    throughput_figure(read_tidy(snakemake.input.csv), snakemake.output.pdf, snakemake.output.png)
