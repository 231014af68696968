# Data: download (Hugging Face only) -> preprocessing into shards -> loader throughput; the one shared starting point
# per model, and the model facts (params, FLOPs).


if DOWNLOAD_RECORD:

    rule download_dataset:
        output:
            DOWNLOAD_RECORD,
        log:
            f"{RESULTS}/logs/data/download_dataset.log",
        conda:
            ENV
        params:
            dataset=canonical(config["dataset"]),
            resources=RESOURCES,
        script:
            "../scripts/download_dataset.py"


rule prepare_dataset:
    input:
        DOWNLOAD_RECORD or [],
    output:
        manifest=DATASET_FILES[0],
        timing=f"{DATA_DIR}/preprocess.json",
    log:
        f"{RESULTS}/logs/data/prepare_dataset.log",
    conda:
        ENV
    threads: workflow.cores
    params:
        dataset=canonical(config["dataset"]),
        resources=RESOURCES,
    script:
        "../scripts/make_dataset.py"


rule loader_throughput:
    input:
        DATASET_FILES,
    output:
        f"{RESULTS}/loader/throughput.json",
    log:
        f"{RESULTS}/logs/data/loader_throughput.log",
    conda:
        ENV
    threads: workflow.cores
    params:
        batch_sizes=LOADER_BATCH_SIZES,
        loader=canonical(config["loader"]),
        seed=canonical(config["seed"]),
    script:
        "../scripts/loader_throughput.py"


rule init_weights:
    input:
        pretrained=lambda wildcards: config["pretrained"].get(wildcards.model, []),
    output:
        weights=f"{RESULTS}/weights/{{model}}.npz",
        provenance=f"{RESULTS}/weights/{{model}}.json",
    log:
        f"{RESULTS}/logs/weights/{{model}}.log",
    conda:
        ENV
    params:
        num_classes=canonical(config["dataset"]["num_classes"]),
        image_size=canonical(config["dataset"]["image_size"]),
        seed=canonical(config["seed"]),
        head_init=canonical(config["head_init"]),
    script:
        "../scripts/init_weights.py"


rule model_facts:
    output:
        f"{RESULTS}/facts/{{model}}.json",
    log:
        f"{RESULTS}/logs/facts/{{model}}.log",
    conda:
        ENV
    params:
        num_classes=canonical(config["dataset"]["num_classes"]),
        image_size=canonical(config["dataset"]["image_size"]),
    script:
        "../scripts/model_facts.py"
