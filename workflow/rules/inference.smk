# Inference cells, measured by comparison group: one job per model, precision and batch size runs the cells of every
# framework in interleaved trial rounds whose order rotates (round 1: torch, jax, tensorflow; round 2: jax,
# tensorflow, torch; ...), each trial a fresh, isolated, supervised process, so drift of the machine over time hits
# the frameworks alike. Adding a batch size or a model runs only the new groups; adding a framework reruns every
# group, because a comparison needs its cells measured interleaved. With --resources gpu=N up to N groups run at
# once, each on its own GPU slot (a GPU and 1/N of the cores, see fwbench.slots); with gpu=1 nothing runs beside a
# timed cell.


rule inference_group:
    input:
        dataset=DATASET_FILES,
        weights=WEIGHTS,
        device=DEVICE_RECORD,
    output:
        inference_group_outputs(),
    log:
        f"{RESULTS}/logs/cells/inference/{{model}}/{{precision}}/bs{{batch}}.log",
    conda:
        ENV
    threads: CELL_THREADS
    resources:
        runtime=runtime_minutes("inference_group"),
        slurm_extra=SLURM_EXTRA,
        gpu=1,
        gpu_slots=GPU_SLOTS,
    params:
        suite="inference",
        frameworks=canonical(config["frameworks"]),
        harness_version=HARNESS_VERSION,
        settings=measurement_settings("inference"),
        image_size=canonical(config["dataset"]["image_size"]),
        num_classes=canonical(config["dataset"]["num_classes"]),
        slot_dir=SLOT_DIR,
        job_record=job_record("inference_group", "{model}/{precision}/bs{batch}"),
    script:
        "../scripts/run_cells.py"
