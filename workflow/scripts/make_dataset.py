from pathlib import Path

from fwbench.data.prepare import prepare
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    manifest = prepare(
        snakemake.params.dataset,
        Path(snakemake.output.manifest).parent,
        resources=snakemake.params.resources,
        workers=snakemake.threads,
        offline=True,  # a Hub dataset was fetched by the download rule; nothing here may touch the network
    )
    print({split: entry["count"] for split, entry in manifest["splits"].items()}, manifest["timing"])
