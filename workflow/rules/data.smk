# Data: the embedded dataset, the one shared starting point per model, and the model facts (params, FLOPs).


rule embedded_dataset:
    output:
        DATASET_FILES,
    log:
        f"{RESULTS}/logs/data/embedded_dataset.log",
    params:
        dataset=config["dataset"],
    conda:
        ENV
    script:
        "../scripts/make_dataset.py"


rule init_weights:
    input:
        pretrained=lambda wildcards: config["pretrained"].get(wildcards.model, []),
    output:
        weights=f"{RESULTS}/weights/{{model}}.npz",
        provenance=f"{RESULTS}/weights/{{model}}.json",
    log:
        f"{RESULTS}/logs/weights/{{model}}.log",
    params:
        num_classes=config["dataset"]["num_classes"],
        image_size=config["dataset"]["image_size"],
        seed=config["seed"],
    conda:
        ENV
    script:
        "../scripts/init_weights.py"


rule model_facts:
    output:
        f"{RESULTS}/facts/{{model}}.json",
    log:
        f"{RESULTS}/logs/facts/{{model}}.log",
    params:
        num_classes=config["dataset"]["num_classes"],
        image_size=config["dataset"]["image_size"],
    conda:
        ENV
    script:
        "../scripts/model_facts.py"
