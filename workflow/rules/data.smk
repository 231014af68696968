# Data: download (Hugging Face only) -> preprocessing into shards -> loader throughput; the one shared starting point
# per model, and the model facts (params, FLOPs).


if DOWNLOAD_RECORD:

    rule download_dataset:
        output:
            DOWNLOAD_RECORD,
        log:
            f"{RESULTS}/logs/data/download_dataset.log",
        benchmark:
            benchmark_file("download_dataset")
        localrule: True
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
        manifest=report(
            DATASET_FILES[0],
            caption="../report/dataset_manifest.rst",
            category="Data",
            subcategory="Dataset",
        ),
        timing=report(
            PREPROCESS_RECORD,
            caption="../report/preprocess.rst",
            category="Data",
            subcategory="Dataset",
        ),
    log:
        f"{RESULTS}/logs/data/prepare_dataset.log",
    benchmark:
        benchmark_file("prepare_dataset")
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
        report(
            LOADER_RECORD,
            caption="../report/loader_record.rst",
            category="Data",
            subcategory="Loader",
        ),
    log:
        f"{RESULTS}/logs/data/loader_throughput.log",
    benchmark:
        benchmark_file("loader_throughput")
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
        dataset=DATASET_FILES,
    output:
        weights=WEIGHTS,
        provenance=report(
            WEIGHTS_PROVENANCE,
            caption="../report/weights_provenance.rst",
            category="Data",
            subcategory="Starting weights",
        ),
    log:
        f"{RESULTS}/logs/weights/{{model}}.log",
    benchmark:
        benchmark_file("init_weights", "{model}")
    # before any measuring job where both could run: a job whose warm workers serve the other models too measures
    # only those whose weights exist (fwbench.workflow.comparison_jobs)
    priority: 50
    localrule: True
    conda:
        ENV
    params:
        num_classes=canonical(config["dataset"]["num_classes"]),
        image_size=canonical(config["dataset"]["image_size"]),
        seed=canonical(config["seed"]),
        head_init=canonical(config["head_init"]),
        calibration_images=canonical(config["bn_calibration_images"]),
    script:
        "../scripts/init_weights.py"


rule model_facts:
    output:
        report(
            FACTS,
            caption="../report/model_facts.rst",
            category="Data",
            subcategory="Model facts",
        ),
    log:
        f"{RESULTS}/logs/facts/{{model}}.log",
    benchmark:
        benchmark_file("model_facts", "{model}")
    conda:
        ENV
    params:
        num_classes=canonical(config["dataset"]["num_classes"]),
        image_size=canonical(config["dataset"]["image_size"]),
    script:
        "../scripts/model_facts.py"
