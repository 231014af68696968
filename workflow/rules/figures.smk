# Figures, LaTeX tables and the macros quoted in the paper's text, all from the tidy table.


rule inference_figure:
    input:
        csv=f"{RESULTS}/tables/inference.csv",
    output:
        pdf=f"{RESULTS}/figures/inference_throughput.pdf",
        png=report(
            f"{RESULTS}/figures/inference_throughput.png",
            caption="../report/inference_throughput.rst",
            category="Inference",
        ),
    log:
        f"{RESULTS}/logs/figures/inference_throughput.log",
    conda:
        ENV
    script:
        "../scripts/figures.py"


rule loader_figure:
    input:
        loader=rules.loader_throughput.output[0],
        csv=rules.aggregate_inference.output.csv,
    output:
        pdf=f"{RESULTS}/figures/loader_throughput.pdf",
        png=report(
            f"{RESULTS}/figures/loader_throughput.png",
            caption="../report/loader_throughput.rst",
            category="Data",
        ),
    log:
        f"{RESULTS}/logs/figures/loader_throughput.log",
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
        ),
    log:
        f"{RESULTS}/logs/figures/training_curves.log",
    conda:
        ENV
    script:
        "../scripts/training_figure.py"


rule paper_tables:
    input:
        csv=rules.aggregate_inference.output.csv,
        manifest=rules.prepare_dataset.output.manifest,
        preprocess=rules.prepare_dataset.output.timing,
        loader=rules.loader_throughput.output[0],
        training=TRAINING_TABLES,
        speedups=rules.aggregate_inference.output.speedups,
        cells=inference_cells(),
        facts=expand(rules.model_facts.output[0], model=config["models"]),
        weights=expand(rules.init_weights.output.provenance, model=config["models"]),
    output:
        inference=f"{RESULTS}/tables/inference.tex",
        failures=f"{RESULTS}/tables/failures.tex",
        environment=f"{RESULTS}/tables/environment.tex",
        macros=f"{RESULTS}/tables/macros.tex",
        models=f"{RESULTS}/tables/models.tex",
        dataset=f"{RESULTS}/tables/dataset.tex",
        loader=f"{RESULTS}/tables/loader.tex",
        training=f"{RESULTS}/tables/training_section.tex",
    log:
        f"{RESULTS}/logs/figures/paper_tables.log",
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
