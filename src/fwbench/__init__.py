"""fwbench: a reproducible benchmark study of deep-learning frameworks.

HARNESS_VERSION is part of every benchmark cell's Snakemake params: bump it whenever a change alters what a cell
measures (timing method, stopping rule, precision policy), so that existing results are rerun rather than mixed
with new ones.
"""

__version__ = "0.1.0"
# 2: CI stopping rule; 3: windowed RSS peak, energy window, cold-input warm-up; 4: 250 ms RSS sampling when timed;
# 5 (measurement review): interleaved trial rounds with CIs over trials, order-statistic stopping rule, CUDA events
# in a pass of their own, TF32 peak and time-sized peak probe, idle baseline at one point, host casts, steady-state
# device memory, training RSS policy without checkpoints, loader-side layout, one training compile-time measure;
# 6: classified failures (failure.kind), the fallback ladder (deviations), host memory limit, result schema 2.
# 9: trial rounds in the order of a Williams design (provenance.group.order, each trial's round_order), the noise
# flag judged per trial (each trial's noisy, metrics.noisy_trials; flags.noisy when any trial is).
# 12: a cell's later launches load the programs its first launch compiled (compile.launch_cache), each launch's
# cache state recorded.
# 13: with the launch cache, the cold compile runs in a compile launch of its own before the measured launches, which
# all start warm (fwbench.running.compile_launch); compile_s and first_call_s are the compile launch's.
# 14: a warm worker serves every cell of its framework and mode in its launch (share_workers: launch), its blocks run
# comparison by comparison; what it held beside a cell is recorded (metrics.worker); every inference cell keeps the
# logits of its first 8 images (metrics.parity_logits), the parity check's input.
HARNESS_VERSION = "14"
RESULT_SCHEMA_VERSION = 2
