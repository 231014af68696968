# Inference cells: one isolated, supervised process per cell. gpu=1 + all cores = nothing runs beside a timed cell.


rule inference_cell:
    input:
        dataset=DATASET_FILES,
        weights=rules.init_weights.output.weights,
    output:
        f"{RESULTS}/cells/inference/{{framework}}/{{model}}/{{precision}}/bs{{batch}}.json",
    log:
        f"{RESULTS}/logs/cells/inference/{{framework}}/{{model}}/{{precision}}/bs{{batch}}.log",
    conda:
        ENV
    threads: workflow.cores
    resources:
        gpu=1,
    params:
        suite="inference",
        harness_version=HARNESS_VERSION,
        settings=measurement_settings("inference"),
        image_size=config["dataset"]["image_size"],
        num_classes=config["dataset"]["num_classes"],
    script:
        "../scripts/run_cell.py"
