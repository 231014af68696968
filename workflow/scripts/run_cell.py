from pathlib import Path

from fwbench.config import validate_config
from fwbench.devices import read_record
from fwbench.grid import cell_from_wildcards
from fwbench.jobtime import timed_job
from fwbench.runner import run_cell

cell = cell_from_wildcards(snakemake.wildcards, snakemake.params.suite, snakemake.params.image_size)
with timed_job(snakemake.params.job_record, snakemake.rule, dict(snakemake.wildcards.items())):
    run_cell(
        cell,
        snakemake.params.settings,
        data_dir=Path(snakemake.input.dataset[0]).parent,
        weights_path=snakemake.input.weights,
        num_classes=snakemake.params.num_classes,
        threads=snakemake.threads,
        out_path=snakemake.output[0],
        log_path=snakemake.log[0],
        state_dir=getattr(snakemake.params, "state_dir", None),
        device_record=read_record(snakemake.input.device),
        slot_dir=snakemake.params.slot_dir,
        gpu_slots=int(snakemake.resources.gpu_slots),
        # The ladder is not a param: adding a workaround must not rerun cells that never needed one.
        fallbacks=validate_config(snakemake.config)["fallbacks"],
    )
