from pathlib import Path

from fwbench.data.throughput import measure_loader
from fwbench.io import atomic_write_json
from fwbench.logs import redirect_to
from fwbench.threads import pin_threads

with redirect_to(snakemake.log[0]):
    threads = pin_threads(snakemake.threads)
    result = measure_loader(
        Path(snakemake.input[0]).parent,
        snakemake.params.batch_sizes,
        snakemake.params.loader,
        seed=snakemake.params.seed,
    )
    result["threads"] = threads
    atomic_write_json(snakemake.output[0], result)
    print(result["rows"])
