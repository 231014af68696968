from fwbench.threads import pin_threads

threads = pin_threads(snakemake.threads)  # before torch or jax start their thread pools

from fwbench.io import atomic_write_json  # noqa: E402
from fwbench.logs import redirect_to  # noqa: E402
from fwbench.trackers.flops import measure_peak  # noqa: E402

with redirect_to(snakemake.log[0]):
    import torch

    torch.set_num_threads(threads["effective"])
    peak = measure_peak()
    peak["threads"] = threads
    atomic_write_json(snakemake.output[0], peak)
    print({p: peak[p]["peak_flops"] / 1e9 for p in ("fp32", "bf16")})
