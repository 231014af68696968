from fwbench.data.hub import download
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    print(download(snakemake.params.dataset, snakemake.params.resources, snakemake.output[0]))
