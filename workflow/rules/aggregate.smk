# Aggregation: all cell JSONs -> one tidy table, plus the environment summary the paper prints.


rule aggregate_inference:
    input:
        inference_cells(),
    output:
        csv=f"{RESULTS}/tables/inference.csv",
        speedups=f"{RESULTS}/tables/speedups.csv",
    log:
        f"{RESULTS}/logs/aggregate/inference.log",
    conda:
        ENV
    script:
        "../scripts/aggregate.py"
