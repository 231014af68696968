from fwbench.analysis.inference.figures import mode_gain_figure
from fwbench.analysis.inference.tidy import read_tidy
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    mode_gain_figure(read_tidy(snakemake.input.gains), snakemake.output.pdf, snakemake.output.png)
