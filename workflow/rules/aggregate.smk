# Aggregation: all cell JSONs -> one tidy table, plus the environment summary the paper prints.


rule aggregate_inference:
    input:
        cells=inference_cells(),
        facts=expand(FACTS, model=config["models"]),
        peak=PEAK_RECORD,
    output:
        csv=report(
            INFERENCE_CSV,
            caption="../report/inference_table.rst",
            category="Inference",
            subcategory="Tables",
        ),
        speedups=report(
            SPEEDUPS_CSV,
            caption="../report/speedups_table.rst",
            category="Inference",
            subcategory="Tables",
        ),
    log:
        f"{RESULTS}/logs/aggregate/inference.log",
    benchmark:
        benchmark_file("aggregate_inference")
    localrule: True
    conda:
        ENV
    script:
        "../scripts/aggregate.py"


rule aggregate_training:
    input:
        cells=training_cells(),
    output:
        epochs=report(
            f"{RESULTS}/tables/training.csv",
            caption="../report/training_table.rst",
            category="Training",
            subcategory="Tables",
        ),
        step0=report(
            f"{RESULTS}/tables/training_step0.csv",
            caption="../report/training_step0.rst",
            category="Training",
            subcategory="Tables",
        ),
    log:
        f"{RESULTS}/logs/aggregate/training.log",
    benchmark:
        benchmark_file("aggregate_training")
    localrule: True
    conda:
        ENV
    script:
        "../scripts/aggregate_training.py"
