# Study-level probe of the device's peak FLOP rate (timed, so GPU-locked like a cell, and with all cores, so nothing
# runs beside it), on the device the device check recorded.


rule device_peak:
    input:
        device=DEVICE_RECORD,
    output:
        PEAK_RECORD,
    log:
        f"{RESULTS}/logs/probe/peak.log",
    conda:
        ENV
    threads: workflow.cores
    resources:
        runtime=runtime_minutes("device_peak"),
        slurm_extra=SLURM_EXTRA,
        gpu=1,
        gpu_model=GPU_MODEL,
        constraint=GPU_CONSTRAINT,
    params:
        harness_version=HARNESS_VERSION,
        precisions=canonical(config["precisions"]),
        job_record=job_record("device_peak", ""),
    script:
        "../scripts/device_peak.py"
