# Inference cells, measured by comparison: one job per model, precision and batch size runs the cells of every
# framework and mode, in launches of warm workers whose order rotates (a Williams design, fwbench.running), each
# worker one fresh, isolated, supervised process per launch, so drift of the machine over time hits the frameworks
# alike. Snakemake plans exactly the comparisons that are new or stale: adding a batch size, model or precision runs
# only its cells; a framework reruns its models' comparisons (a comparison's cells are measured interleaved). With
# inference.share_workers the first job of a model and precision measures, in the same workers (one process per
# framework and mode per launch serving every batch size), every other batch size of its model that is due, and holds
# their cells in results/held/ for their own jobs, which then measure nothing (fwbench.workflow.comparison_jobs).
# With --resources gpu=N up to N jobs run at once, each on its own GPU slot (a GPU and 1/N of the cores, see
# fwbench.running.slots); with gpu=1 nothing runs beside a timed cell.


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
            device=MEASURED_ON,
        output:
            inference_group_outputs(group_models[0]),
        log:
            f"{RESULTS}/logs/cells/inference/{COMPARISON_JOB}.log",
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
            harness_version=HARNESS_VERSION,
            device=device_params(suite_frameworks(config, "inference")),
            settings=comparison_settings("inference"),
            image_size=canonical(config["dataset"]["image_size"]),
            num_classes=canonical(config["dataset"]["num_classes"]),
            slot_dir=SLOT_DIR,
            job_record=job_record(group_rule, COMPARISON_JOB),
        script:
            "../scripts/run_cells.py"
