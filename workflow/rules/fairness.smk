# The fairness ledger: every framework's logits of every model's study weights on the same validation images, taken
# from its own inference cells (the first call of each timed program) or, in a study without the inference suite,
# from a job of its own per framework (no two frameworks in one process); they are compared with PyTorch's; the
# ledger reads that comparison and every cell's own records.


rule parity_logits:
    input:
        unpack(parity_inputs),
    output:
        logits=f"{RESULTS}/parity/{{framework}}.npz",
        record=f"{RESULTS}/parity/{{framework}}.json",
    log:
        f"{RESULTS}/logs/parity/{{framework}}.log",
    benchmark:
        benchmark_file("parity_logits", "{framework}")
    conda:
        ENV
    threads: CELL_THREADS
    resources:
        runtime=runtime_minutes("parity_logits"),
        slurm_extra=SLURM_EXTRA,
        gpu=0 if PARITY_FROM_CELLS else 1,
        gpu_model=GPU_MODEL,
        constraint=GPU_CONSTRAINT,
    params:
        models=canonical(config["models"]),
        precisions=canonical(config["precisions"]),
        num_classes=canonical(config["dataset"]["num_classes"]),
        image_size=canonical(config["dataset"]["image_size"]),
    script:
        "../scripts/parity_logits.py"


rule parity:
    input:
        records=expand(
            f"{RESULTS}/parity/{{framework}}.json", framework=config["frameworks"]
        ),
        logits=expand(
            f"{RESULTS}/parity/{{framework}}.npz", framework=config["frameworks"]
        ),
    output:
        report(
            PARITY_CSV,
            caption="../report/parity.rst",
            category="Fairness",
            subcategory="Tables",
        ),
    log:
        f"{RESULTS}/logs/parity/compare.log",
    benchmark:
        benchmark_file("parity")
    localrule: True
    conda:
        ENV
    script:
        "../scripts/parity.py"


rule fairness_ledger:
    input:
        cells=suite_indexes("inference", "training", "micro"),
        parity=PARITY_CSV,
        inference=INFERENCE_CSV,
        speedups=SPEEDUPS_CSV,
        templates=TEMPLATES,
    output:
        csv=report(
            LEDGER_CSV,
            caption="../report/ledger.rst",
            category="Fairness",
            subcategory="Tables",
        ),
        section=LEDGER_SECTION,
    log:
        f"{RESULTS}/logs/figures/fairness_ledger.log",
    benchmark:
        benchmark_file("fairness_ledger")
    localrule: True
    conda:
        ENV
    params:
        ratio_modes=canonical(config["ratio_modes"]),
    script:
        "../scripts/ledger.py"
