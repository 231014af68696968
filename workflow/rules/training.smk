# Training cells: the recipe in one isolated, supervised process per cell, one at a time with all cores. Epoch
# checkpoints live under results/state/ (not outputs), so a killed cell resumes from its last completed epoch.
# cluster.pairing: same_node groups every framework's cell of one comparison; profiles/slurm joins the group's
# components (the cells share no dependency) into one job on one node (group-components).
TRAINING_GROUP = cluster.training_group(config)


rule training_cell:
    input:
        dataset=DATASET_FILES,
        weights=WEIGHTS,
        device=MEASURED_ON,
    output:
        f"{RESULTS}/cells/training/{{framework}}/{{mode}}/{{model}}/{{precision}}/bs{{batch}}.json",
    log:
        f"{RESULTS}/logs/cells/training/{{framework}}/{{mode}}/{{model}}/{{precision}}/bs{{batch}}.log",
    group:
        # cluster.pairing: same_node puts every framework's cell of one comparison in one job on one node
        TRAINING_GROUP
    conda:
        ENV
    threads: CELL_THREADS
    resources:
        runtime=runtime_minutes("training_cell"),
        slurm_extra=SLURM_EXTRA,
        gpu=1,
        gpu_model=GPU_MODEL,
        constraint=GPU_CONSTRAINT,
        gpu_slots=GPU_SLOTS,
    params:
        suite="training",
        harness_version=HARNESS_VERSION,
        device=lambda wildcards: device_params([wildcards.framework]),
        settings=measurement_settings("training"),
        image_size=canonical(config["dataset"]["image_size"]),
        num_classes=canonical(config["dataset"]["num_classes"]),
        slot_dir=SLOT_DIR,
        job_record=job_record(
            "training_cell", "{framework}/{mode}/{model}/{precision}/bs{batch}"
        ),
        state_dir=lambda wildcards: f"{RESULTS}/state/training/{wildcards.framework}/{wildcards.mode}/{wildcards.model}/"
        f"{wildcards.precision}/bs{wildcards.batch}",
    script:
        "../scripts/run_cells.py"
