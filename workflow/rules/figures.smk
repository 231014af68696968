# Figures, LaTeX tables and the macros quoted in the paper's text, all from the tidy table.


rule inference_figure:
    input:
        csv=INFERENCE_CSV,
    output:
        pdf=INFERENCE_FIGURE,
        png=report(
            f"{RESULTS}/figures/inference_throughput.png",
            caption="../report/inference_throughput.rst",
            category="Inference",
            subcategory="Figures",
        ),
    log:
        f"{RESULTS}/logs/figures/inference_throughput.log",
    benchmark:
        benchmark_file("inference_figure")
    localrule: True
    conda:
        ENV
    script:
        "../scripts/figures.py"


# The eager-vs-compiled gain within PyTorch (a figure that says so where no framework ran in two modes).
MODE_GAIN_FIGURE = f"{RESULTS}/figures/mode_gain.pdf"


rule mode_gain_figure:
    input:
        gains=MODE_GAINS_CSV,
    output:
        pdf=MODE_GAIN_FIGURE,
        png=report(
            f"{RESULTS}/figures/mode_gain.png",
            caption="../report/mode_gain.rst",
            category="Inference",
            subcategory="Figures",
        ),
    log:
        f"{RESULTS}/logs/figures/mode_gain.log",
    benchmark:
        benchmark_file("mode_gain_figure")
    localrule: True
    conda:
        ENV
    script:
        "../scripts/mode_gain_figure.py"


# The paper's headline figure: every framework ratio with its interval, by model and framework pair (a forest plot,
# fwbench.analysis.inference.forest).
HEADLINE_FIGURE = f"{RESULTS}/figures/headline_ratios.pdf"


rule headline_figure:
    input:
        speedups=SPEEDUPS_CSV,
    output:
        pdf=HEADLINE_FIGURE,
        png=report(
            f"{RESULTS}/figures/headline_ratios.png",
            caption="../report/headline_ratios.rst",
            category="Inference",
            subcategory="Figures",
        ),
    log:
        f"{RESULTS}/logs/figures/headline_ratios.log",
    benchmark:
        benchmark_file("headline_figure")
    localrule: True
    conda:
        ENV
    script:
        "../scripts/headline_figure.py"


rule loader_figure:
    input:
        loader=LOADER_RECORD,
        csv=INFERENCE_CSV,
    output:
        pdf=LOADER_FIGURE,
        png=report(
            f"{RESULTS}/figures/loader_throughput.png",
            caption="../report/loader_throughput.rst",
            category="Data",
            subcategory="Loader",
        ),
    log:
        f"{RESULTS}/logs/figures/loader_throughput.log",
    benchmark:
        benchmark_file("loader_figure")
    localrule: True
    conda:
        ENV
    script:
        "../scripts/loader_figure.py"


rule training_figure:
    input:
        cells=training_cells(),
    output:
        pdf=f"{RESULTS}/figures/training_curves.pdf",
        png=report(
            f"{RESULTS}/figures/training_curves.png",
            caption="../report/training_curves.rst",
            category="Training",
            subcategory="Figures",
        ),
    log:
        f"{RESULTS}/logs/figures/training_curves.log",
    benchmark:
        benchmark_file("training_figure")
    localrule: True
    conda:
        ENV
    script:
        "../scripts/training_figure.py"


rule paper_tables:
    input:
        csv=INFERENCE_CSV,
        manifest=DATASET_FILES[0],
        preprocess=PREPROCESS_RECORD,
        loader=LOADER_RECORD,
        training=TRAINING_TABLES,
        # the published L4 small-CNN training figures, copied into the repository (reference/README.md)
        training_reference=TRAINING_REFERENCE,
        speedups=SPEEDUPS_CSV,
        mode_gains=MODE_GAINS_CSV,
        cells=suite_indexes("inference"),
        facts=expand(FACTS, model=config["models"]),
        weights=expand(WEIGHTS_PROVENANCE, model=config["models"]),
        # the wording of the Results' findings, the training section and the method's sentences
        templates=TEMPLATES,
    output:
        **PAPER_TABLES,
    log:
        f"{RESULTS}/logs/figures/paper_tables.log",
    benchmark:
        benchmark_file("paper_tables")
    localrule: True
    conda:
        ENV
    params:
        frameworks=canonical(config["frameworks"]),
        study=canonical(config["study"]),
        report=canonical(config["report"]),
        dataset=canonical(config["dataset"]),
        inference=measurement_settings("inference"),
        fallbacks=canonical(config["fallbacks"]),
    script:
        "../scripts/tables.py"
