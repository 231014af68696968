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


rule paper_tables:
    input:
        csv=rules.aggregate_inference.output.csv,
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
    log:
        f"{RESULTS}/logs/figures/paper_tables.log",
    conda:
        ENV
    params:
        frameworks=config["frameworks"],
        study=config["study"],
        report=config["report"],
        dataset=config["dataset"],
        inference=measurement_settings("inference"),
    script:
        "../scripts/tables.py"
