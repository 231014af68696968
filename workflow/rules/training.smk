# Training cells: the recipe in one isolated, supervised process per cell, one at a time with all cores. Epoch
# checkpoints live under results/state/ (not outputs), so a killed cell resumes from its last completed epoch.


rule training_cell:
    input:
        dataset=DATASET_FILES,
        weights=WEIGHTS,
        device=DEVICE_RECORD,
    output:
        f"{RESULTS}/cells/training/{{framework}}/{{model}}/{{precision}}/bs{{batch}}.json",
    log:
        f"{RESULTS}/logs/cells/training/{{framework}}/{{model}}/{{precision}}/bs{{batch}}.log",
    conda:
        ENV
    threads: CELL_THREADS
    resources:
        gpu=1,
        gpu_slots=GPU_SLOTS,
    params:
        suite="training",
        harness_version=HARNESS_VERSION,
        settings=measurement_settings("training"),
        image_size=canonical(config["dataset"]["image_size"]),
        num_classes=canonical(config["dataset"]["num_classes"]),
        slot_dir=SLOT_DIR,
        job_record=job_record(
            "training_cell", "{framework}/{model}/{precision}/bs{batch}"
        ),
        state_dir=lambda wildcards: f"{RESULTS}/state/training/{wildcards.framework}/{wildcards.model}/"
        f"{wildcards.precision}/bs{wildcards.batch}",
    script:
        "../scripts/run_cells.py"
