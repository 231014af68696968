# Aggregation: all cell JSONs -> one tidy table, plus the environment summary the paper prints.


rule aggregate_inference:
    input:
        cells=inference_cells(),
        facts=expand(rules.model_facts.output[0], model=config["models"]),
        peak=rules.device_peak.output[0],
    output:
        csv=f"{RESULTS}/tables/inference.csv",
        speedups=f"{RESULTS}/tables/speedups.csv",
    log:
        f"{RESULTS}/logs/aggregate/inference.log",
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
    conda:
        ENV
    script:
        "../scripts/aggregate_training.py"
