"""Entry point of the measuring rules: one training cell (framework and mode in the wildcards) or one inference or
micro comparison group (every (framework, mode) of params.variants at its batch sizes, in the order of the rule's
outputs), run by fwbench.running.runner.run_group. A micro group reads no dataset; its `weights` input is the
operands file."""

from pathlib import Path

from fwbench.running.devices import read_record
from fwbench.running.runner import run_group
from fwbench.study.config import validate_config
from fwbench.study.grid import cell_from_wildcards
from fwbench.workflow.jobtime import timed_job

wildcards = dict(snakemake.wildcards.items())
variants = [(wildcards["framework"], wildcards["mode"])] if "framework" in wildcards else snakemake.params.variants
# A group whose warm workers serve every batch size names them in params (common.smk: shared_batch_sizes); else the
# job is one batch size's. The cells follow the rule's outputs: variant by variant, each at every batch size.
batches = [wildcards["batch"]] if "batch" in wildcards else [str(b) for b in snakemake.params.batch_sizes]
cells = [
    cell_from_wildcards(
        {**wildcards, "framework": framework, "mode": mode, "batch": batch},
        snakemake.params.suite,
        snakemake.params.image_size,
    )
    for framework, mode in variants
    for batch in batches
]
state_dir = getattr(snakemake.params, "state_dir", None)
with timed_job(snakemake.params.job_record, snakemake.rule, wildcards):
    run_group(
        cells,
        snakemake.params.settings,
        data_dir=Path(snakemake.input.dataset[0]).parent if hasattr(snakemake.input, "dataset") else None,
        weights_path=snakemake.input.weights,
        num_classes=snakemake.params.num_classes,
        threads=snakemake.threads,
        out_paths=list(snakemake.output),
        log_path=snakemake.log[0],
        state_dirs=[state_dir] * len(cells),
        device_record=read_record(snakemake.input.device),
        slot_dir=snakemake.params.slot_dir,
        gpu_slots=int(snakemake.resources.gpu_slots),
        # The ladder is not a param: adding a workaround must not rerun cells that never needed one.
        fallbacks=validate_config(snakemake.config)["fallbacks"],
    )
