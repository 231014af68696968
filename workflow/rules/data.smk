# Data: the embedded dataset and the one shared weight initialisation per model.


rule embedded_dataset:
    output:
        DATASET_FILES,
    log:
        f"{RESULTS}/logs/data/embedded_dataset.log",
    conda:
        ENV
    params:
        dataset=config["dataset"],
    script:
        "../scripts/make_dataset.py"


rule init_weights:
    output:
        f"{RESULTS}/weights/{{model}}.npz",
    log:
        f"{RESULTS}/logs/weights/{{model}}.log",
    conda:
        ENV
    params:
        num_classes=config["dataset"]["num_classes"],
        image_size=config["dataset"]["image_size"],
        seed=config["seed"],
    script:
        "../scripts/init_weights.py"
