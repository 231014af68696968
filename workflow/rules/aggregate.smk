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
