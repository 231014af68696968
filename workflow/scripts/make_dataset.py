from pathlib import Path

from fwbench.data.prepare import prepare
from fwbench.logs import redirect_to

with redirect_to(snakemake.log[0]):
    manifest = prepare(snakemake.params.dataset, Path(snakemake.output[0]).parent)
    print({split: entry["count"] for split, entry in manifest["splits"].items()})
