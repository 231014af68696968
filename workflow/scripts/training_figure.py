from fwbench.analysis.training.figure import training_figure
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    training_figure(snakemake.input.cells, snakemake.output.pdf, snakemake.output.png)
