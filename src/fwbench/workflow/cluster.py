"""What a benchmark job asks a batch scheduler for, from the study's configuration (profiles/slurm submits it).

The time limit comes from the study's own process timeouts: a job's limit is the longest its processes may run (each
trial, and each retry the fallback ladder may add, up to its suite's `timeout_s`) plus a margin for start-up and
writing. So a cell that hangs meets its own timeout first and becomes a recorded `timeout` failure; the scheduler's
limit only ends jobs the harness itself could not (a wedged node, a runner that stopped answering). Locally these
resources mean nothing.

The GPU model goes through the executor's own resources, never through `slurm_extra`: the pinned executor
(snakemake-executor-plugin-slurm 2.8.0) refuses --gpus, --gres and --constraint there (validation.py), and builds
one GPU request from the `gpu` and `gpu_model` resources (utils.set_gres_string: `--gpus=MODEL:N`, or `--gpus=N`
without a model) and `-C` from the `constraint` resource (submit_string.get_submit_command; an empty string would
still add `-C ''`, so an unset constraint is None, which Snakemake drops). `slurm_extra` keeps --exclusive either way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fwbench.running.failures import ladder_from_config
from fwbench.study.grid import cells_per_worker, group_variants, suite_models

# Interpreter start, imports, loading, writing results and the runner around its processes (minutes); measured at
# under a minute per group on the 2-core development machine, so 10 leaves room for a slow shared file system.
MARGIN_MIN = 10
# The device check probes each framework in a process of its own (fwbench.running.devices.probe); the peak-FLOP probe
# and the parity logits run each framework or precision once: bounded by the inference suite's process timeout.
PROBE_PROCESS_S = 300


def attempts(config: Mapping[str, Any]) -> int:
    """How many times one measuring process may run: once, plus one retry per rung of the fallback ladder."""
    return 1 + len(ladder_from_config(config.get("fallbacks")))


def _minutes(seconds: float) -> int:
    return int(math.ceil(seconds / 60)) + MARGIN_MIN


def runtime_minutes(config: Mapping[str, Any], rule: str) -> int:
    """The time limit (minutes, Snakemake's `runtime` resource, sbatch -t) of one job of a measuring `rule`."""
    if rule in ("inference_group", "micro_group"):
        suite = rule.removesuffix("_group")
        section = config[suite]
        # The largest comparison: every framework in each of its modes (fwbench.study.grid.group_variants), each a
        # worker per launch that may take its timeout once per cell it serves (share_workers), all its cells due.
        cells = max(len(group_variants(config, suite, model)) for model in suite_models(config, suite))
        processes = cells * section["trials"] * attempts(config)
        return _minutes(processes * section["timeout_s"] * cells_per_worker(config, suite))
    if rule == "training_cell":
        return _minutes(attempts(config) * config["training"]["timeout_s"])
    if rule in ("device_check", "device_peak", "parity_logits"):
        processes = len(config["frameworks"]) if rule == "device_check" else len(config["precisions"])
        return _minutes(processes * max(PROBE_PROCESS_S, config["inference"]["timeout_s"]))
    raise ValueError(f"no time limit is defined for rule {rule!r}")


def slurm_extra(config: Mapping[str, Any]) -> str:
    """sbatch options of a benchmark job beyond its GPU, cores, memory and time: the node to itself unless the
    study's `cluster.share_nodes` allows other jobs beside it."""
    return "" if config["cluster"]["share_nodes"] else "--exclusive"


def gpu_model(config: Mapping[str, Any]) -> str | None:
    """The `gpu_model` resource of a job that computes on a GPU: the study's `cluster.gpu_type` (the GRES type the
    cluster names its GPUs by), which the executor turns into the job's one GPU request, `--gpus=TYPE:1`; None (any
    GPU, `--gpus=1`) when unset."""
    return config["cluster"].get("gpu_type") or None


def constraint(config: Mapping[str, Any]) -> str | None:
    """The `constraint` resource of a job that computes on a GPU: the study's `cluster.constraint` (node features,
    sbatch -C); None when unset, so that the executor adds no -C at all."""
    return config["cluster"].get("constraint") or None


def training_group(config: Mapping[str, Any]) -> str | None:
    """The Snakemake job group of a training cell: with `cluster.pairing: same_node`, every framework's cell of one
    model, precision and batch size is one group (submitted as one job, one node); otherwise no group."""
    if config["cluster"]["pairing"] != "same_node":
        return None
    return "training_{model}_{precision}_bs{batch}"
