from pathlib import Path

from fwbench.data.throughput import measure_loader
from fwbench.io import atomic_write_json
from fwbench.running.threads import pin_threads
from fwbench.workflow.logs import redirect_to

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
