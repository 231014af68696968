# Aggregation: all cell JSONs -> one tidy table, plus the environment summary the paper prints.


rule aggregate_inference:
    input:
        cells=inference_cells(),
        facts=expand(FACTS, model=config["models"]),
        peak=PEAK_RECORD,
    output:
        csv=INFERENCE_CSV,
        speedups=SPEEDUPS_CSV,
    log:
        f"{RESULTS}/logs/aggregate/inference.log",
    benchmark:
        benchmark_file("aggregate_inference")
    conda:
        ENV
    script:
        "../scripts/aggregate.py"


rule aggregate_training:
    input:
        cells=training_cells(),
    output:
        epochs=f"{RESULTS}/tables/training.csv",
        step0=f"{RESULTS}/tables/training_step0.csv",
    log:
        f"{RESULTS}/logs/aggregate/training.log",
    benchmark:
        benchmark_file("aggregate_training")
    conda:
        ENV
    script:
        "../scripts/aggregate_training.py"
