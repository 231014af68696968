from fwbench.analysis.inference.tidy import read_tidy
from fwbench.analysis.setup.data_report import loader_figure
from fwbench.io import read_json
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    loader_figure(
        read_json(snakemake.input.loader), read_tidy(snakemake.input.csv), snakemake.output.pdf, snakemake.output.png
    )
