# Inference cells, measured by comparison group: one job per model and precision runs the cells of every framework
# and mode at every batch size, in launches of warm workers whose order rotates (a Williams design, fwbench.running),
# each worker one fresh, isolated, supervised process per launch serving every batch size of its framework and mode
# (inference.share_workers; false: one job and one process per batch size), so drift of the machine over time hits
# the frameworks alike. Adding a model runs only its group; adding a batch size remeasures each model's group (its
# workers serve the new batch size beside the others); adding a framework reruns every group, because a comparison
# needs its cells measured interleaved. With --resources gpu=N up to N groups run at once, each on its own GPU slot
# (a GPU and 1/N of the cores, see fwbench.running.slots); with gpu=1 nothing runs beside a timed cell.


# The mode axis (fwbench.study.modes): torch/eager and torch/compile are cells of the same group. Models outside
# mode_scope.models measure each framework's first mode only, in a rule of their own (fwbench.study.grid.comparison_rules).
for group_rule, group_models in comparison_rules(
    config, "inference", "inference_group"
).items():

    rule:
        name:
            group_rule
        input:
            dataset=DATASET_FILES,
            weights=WEIGHTS,
            device=DEVICE_RECORD,
        output:
            inference_group_outputs(group_models[0]),
        log:
            f"{RESULTS}/logs/cells/inference/{group_job('inference')}.log",
        wildcard_constraints:
            model=alternatives(group_models),
        conda:
            ENV
        threads: CELL_THREADS
        resources:
            runtime=runtime_minutes("inference_group"),
            slurm_extra=SLURM_EXTRA,
            gpu=1,
            gpu_model=GPU_MODEL,
            constraint=GPU_CONSTRAINT,
            gpu_slots=GPU_SLOTS,
        params:
            suite="inference",
            variants=canonical(group_variants(config, "inference", group_models[0])),
            batch_sizes=shared_batch_sizes("inference"),
            harness_version=HARNESS_VERSION,
            settings=measurement_settings("inference"),
            image_size=canonical(config["dataset"]["image_size"]),
            num_classes=canonical(config["dataset"]["num_classes"]),
            slot_dir=SLOT_DIR,
            job_record=job_record(group_rule, group_job("inference")),
        script:
            "../scripts/run_cells.py"
