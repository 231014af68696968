"""Entry point of the measuring rules: one training cell (framework and mode in the wildcards), or one inference or
micro comparison (every (framework, mode) of params.variants at one model, precision and batch size), whose job
measures with it every other comparison its warm workers' scope reaches that is due (the suite's share_workers), or
takes its cells held by such a job
(fwbench.workflow.comparison_jobs). Cells are measured by fwbench.running.runner.run_group. A micro group reads no
dataset; its `weights` input is the operands file."""

from pathlib import Path

from fwbench.workflow.jobtime import timed_job

wildcards = dict(snakemake.wildcards.items())
state_dir = getattr(snakemake.params, "state_dir", None)


def measure(cells, out_paths, job_keys, settings, weights=None):
    from fwbench.running.devices import read_record
    from fwbench.running.runner import run_group
    from fwbench.study.config import validate_config

    run_group(  # each model's own weights where the job measured several (params.weights_pattern)
        cells,
        settings,
        data_dir=Path(snakemake.input.dataset[0]).parent if hasattr(snakemake.input, "dataset") else None,
        weights_path=weights or snakemake.input.weights,
        num_classes=snakemake.params.num_classes,
        threads=snakemake.threads,
        out_paths=out_paths,
        log_path=snakemake.log[0],
        state_dirs=[state_dir] * len(cells),
        device_record=read_record(snakemake.input.device),
        slot_dir=snakemake.params.slot_dir,
        gpu_slots=int(snakemake.resources.gpu_slots),
        # The ladder is not a param: adding a workaround must not rerun cells that never needed one.
        fallbacks=validate_config(snakemake.config)["fallbacks"],
        job_keys=job_keys,
    )


def weights_pattern():
    """Where every model's weights are, from this job's own ("results/weights/{model}.npz"), for a job whose workers
    may serve the other models too (an inference job); None where every cell reads the same file (a micro job's
    operands). They are not the job's inputs (adding a model would rerun every model's jobs): a model whose weights
    do not exist yet is measured by its own job (fwbench.workflow.comparison_jobs.Comparisons.ready)."""
    if snakemake.params.suite != "inference":
        return None
    weights = Path(str(snakemake.input.weights))
    return str(weights.with_name("{model}" + weights.suffix))


with timed_job(snakemake.params.job_record, snakemake.rule, wildcards):
    if "framework" in wildcards:  # a training cell
        from fwbench.study.grid import cell_from_wildcards

        cell = cell_from_wildcards(wildcards, snakemake.params.suite, snakemake.params.image_size)
        measure([cell], list(snakemake.output), [None], snakemake.params.settings)
    else:
        from fwbench.study.grid import DEFAULT_WORKER_SCOPE
        from fwbench.workflow import comparison_jobs

        comparisons = comparison_jobs.Comparisons(
            snakemake.config,
            snakemake.params.suite,
            wildcards["model"],
            wildcards["precision"],
            # the results directory: what precedes cells/ in the job's outputs
            Path(str(snakemake.output[0]).rsplit("/cells/", 1)[0]),
            # what makes a cell stale for Snakemake: its dataset and its own model's weights (not the device record,
            # ancient() in common.smk, nor the other models' weights, which are not its inputs)
            (*map(str, getattr(snakemake.input, "dataset", [])), str(snakemake.input.weights)),
            weights_pattern(),
        )
        outcome = comparison_jobs.run_job(
            comparisons,
            int(wildcards["batch"]),
            list(snakemake.output),
            measure,
            share_workers=snakemake.params.settings.get("share_workers", DEFAULT_WORKER_SCOPE),
        )
        comparison_jobs.write_log_line(snakemake.log[0], outcome)
