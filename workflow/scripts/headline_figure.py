from fwbench.analysis.inference.forest import headline_figure
from fwbench.analysis.inference.tidy import read_tidy
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    headline_figure(read_tidy(snakemake.input.speedups), snakemake.output.pdf, snakemake.output.png)
