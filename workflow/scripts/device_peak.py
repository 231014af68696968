import os

from fwbench.running.devices import read_record
from fwbench.running.threads import pin_threads

threads = pin_threads(snakemake.threads)  # before torch or jax start their thread pools
# On the study's device, as every cell: device: cpu hides the GPUs from both frameworks before they start.
record = read_record(snakemake.input.device)
os.environ.update(record["environment"])
# As in every cell: JAX allocates on demand, so the torch probes and the memory bound see the device's free memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from fwbench.io import atomic_write_json  # noqa: E402
from fwbench.trackers.flops import measure_peak, probed_precisions  # noqa: E402
from fwbench.workflow.jobtime import timed_job  # noqa: E402
from fwbench.workflow.logs import redirect_to  # noqa: E402

with redirect_to(snakemake.log[0]), timed_job(snakemake.params.job_record, snakemake.rule, {}):
    import torch

    torch.set_num_threads(threads["effective"])
    peak = measure_peak(precisions=probed_precisions(snakemake.params.precisions))
    peak["threads"] = threads
    peak["device_platform"] = record["platform"]
    atomic_write_json(snakemake.output[0], peak)
    print({p: peak[p]["peak_flops"] / 1e9 for p in peak["precisions"]}, f"{peak['probe_s']:.1f} s")
