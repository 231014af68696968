# One device per study: every framework is asked, in a fresh process of its own, what it computes on; the study
# stops here with one line if they disagree. Every benchmark rule takes the record as input, so none runs before it.


rule device_check:
    output:
        DEVICE_RECORD,
    log:
        f"{RESULTS}/logs/device_check.log",
    benchmark:
        benchmark_file("device_check")
    priority: 100  # first, so that a refusal comes in seconds, not after preprocessing the dataset
    conda:
        ENV
    resources:
        gpu=1,
        gpu_model=GPU_MODEL,
        constraint=GPU_CONSTRAINT,
        runtime=runtime_minutes("device_check"),
        gpu_slots=GPU_SLOTS,
    params:
        device=canonical(config["device"]),
        frameworks=canonical(config["frameworks"]),
        # Reinstalling a framework (e.g. adding JAX's CUDA plugin) reruns the check, and so every cell.
        software=SOFTWARE_FINGERPRINT,
    script:
        "../scripts/device_check.py"
