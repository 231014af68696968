# The micro suite: a matrix product and a small MLP timed per call in NumPy (the baseline) and every framework, by
# batch size (fwbench.scenarios.micro). The operands are made once from the study's seed; one job per operation,
# precision and batch size runs every framework's cells in launches of warm workers, the first job of an operation
# measuring its other batch sizes that are due in the same workers (micro.share_workers), like an inference job; the
# analysis computes speedups over NumPy with intervals over processes (paired by round; within one process with one
# trial, labelled so) and the crossover batch sizes from the point estimates, with intervals from resampling each
# series (fwbench.analysis.micro.speedups, fwbench.analysis.micro.crossovers).

if MICRO:

    rule micro_operands:
        output:
            operands=MICRO_OPERANDS,
            provenance=MICRO_OPERANDS.removesuffix(".npz") + ".json",
        log:
            f"{RESULTS}/logs/micro/operands.log",
        benchmark:
            benchmark_file("micro_operands")
        localrule: True
        conda:
            ENV
        params:
            seed=canonical(config["seed"]),
            sizes=canonical(
                {key: config["micro"][key] for key in ("dim", "hidden", "classes")}
            ),
        script:
            "../scripts/micro_operands.py"

    rule micro_group:
        input:
            weights=MICRO_OPERANDS,
            device=MEASURED_ON,
        output:
            micro_group_outputs(),
        log:
            f"{RESULTS}/logs/cells/micro/{COMPARISON_JOB}.log",
        conda:
            ENV
        threads: CELL_THREADS
        resources:
            runtime=runtime_minutes("micro_group"),
            slurm_extra=SLURM_EXTRA,
            gpu=1,
            gpu_model=GPU_MODEL,
            constraint=GPU_CONSTRAINT,
            gpu_slots=GPU_SLOTS,
        params:
            suite="micro",
            variants=canonical(micro_variants()),
            harness_version=HARNESS_VERSION,
            device=device_params(suite_frameworks(config, "micro")),
            settings=comparison_settings("micro"),
            image_size=None,
            num_classes=canonical(config["micro"]["classes"]),
            slot_dir=SLOT_DIR,
            job_record=job_record("micro_group", COMPARISON_JOB),
        script:
            "../scripts/run_cells.py"


# The micro suite's figure and tables in the HTML report (`snakemake --report`): common.smk's MICRO_OUTPUTS with
# these marked by report(), which changes nothing else about them. report() on the figure, already marked in
# common.smk, re-marks that same path object, so the paper rule's input carries the same mark.
MICRO_REPORT = {
    "png": ("micro.rst", "Figures"),
    "csv": ("micro_table.rst", "Tables"),
    "speedups": ("micro_speedups_table.rst", "Tables"),
    "crossovers": ("micro_crossovers_table.rst", "Tables"),
}
MICRO_REPORTED_OUTPUTS = MICRO_OUTPUTS | {
    key: report(
        MICRO_OUTPUTS[key],
        caption=f"../report/{caption}",
        category="Micro-benchmarks",
        subcategory=subcategory,
    )
    for key, (caption, subcategory) in MICRO_REPORT.items()
    if key in MICRO_OUTPUTS
}


rule micro_analysis:
    input:
        cells=micro_cells(),
        reference=MICRO_REFERENCE if MICRO else [],
        templates=TEMPLATES,
    output:
        **MICRO_REPORTED_OUTPUTS,
    log:
        f"{RESULTS}/logs/report/micro_analysis.log",
    benchmark:
        benchmark_file("micro_analysis")
    localrule: True
    conda:
        ENV
    params:
        # how the speedups' verdicts are adjusted within each family (fwbench.analysis.common.verdicts.adjust_verdicts)
        multiplicity=config["analysis"]["multiplicity"],
    script:
        "../scripts/micro_analysis.py"
