"""What a benchmark job asks a scheduler for (fwbench.workflow.cluster), from the study's configuration."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fwbench.study.config import ConfigError, validate_config
from fwbench.workflow import cluster
from tests.conftest import TINY_CONFIG


def _config(**changes) -> dict:
    return validate_config({**TINY_CONFIG, "suites": ["inference", "training", "micro"], **changes})


def test_time_limits_follow_the_process_timeouts():
    """Two frameworks × 3 trials × (1 + 3 ladder rungs) processes, each a worker serving the launch's 2 cells (one
    model at two batch sizes) of 120 s each = 96 min, plus the 10-minute margin; a training cell: (1 + 3) × its
    3600 s; micro: NumPy and two frameworks × 3 trials (the default) × 4 × 600 s × the 14 cells (2 operations at the
    default 7 batch sizes) a worker serves. A narrower worker scope asks for less."""
    config = _config(inference={**TINY_CONFIG["inference"], "trials": 3})
    assert cluster.attempts(config) == 4
    assert cluster.runtime_minutes(config, "inference_group") == 2 * 48 + 10
    assert cluster.runtime_minutes(config, "training_cell") == 4 * 60 + 10
    assert cluster.runtime_minutes(config, "micro_group") == 3 * 3 * 4 * 10 * 14 + 10
    narrow = _config(inference={**TINY_CONFIG["inference"], "trials": 3, "share_workers": "cell"})
    assert cluster.runtime_minutes(narrow, "inference_group") == 48 + 10
    assert cluster.runtime_minutes(config, "device_check") == 2 * 5 + 10
    without_ladder = _config(fallbacks={"enabled": False})
    assert cluster.runtime_minutes(without_ladder, "training_cell") == 60 + 10
    with pytest.raises(ValueError, match="paper"):
        cluster.runtime_minutes(config, "paper")


def test_node_sharing_and_pairing_are_study_settings():
    config = _config()
    assert (config["cluster"]["pairing"], config["cluster"]["share_nodes"]) == ("any", False)
    assert cluster.slurm_extra(config) == "--exclusive" and cluster.training_group(config) is None
    shared = _config(cluster={"pairing": "same_node", "share_nodes": True})
    assert cluster.slurm_extra(shared) == ""
    assert cluster.training_group(shared) == "training_{model}_{precision}_bs{batch}"


def test_an_unknown_pairing_is_a_one_line_config_error():
    with pytest.raises(ConfigError, match="pairing"):
        _config(cluster={"pairing": "same_rack"})


def test_the_slurm_profile_joins_the_training_group_it_names():
    """The group's cells share no dependency: without group-components for this very group name, same_node would
    submit one job per framework (seen on the test cluster)."""
    import yaml

    from tests.conftest import REPO

    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    group = cluster.training_group(_config(cluster={"pairing": "same_node"}))
    # one component per framework and mode: every mode of every framework a study may configure
    from fwbench.study.modes import MODES

    most = sum(len(MODES[framework]) for framework in ("torch", "jax", "tensorflow"))
    assert f"{group}={most}" in profile["group-components"]
    assert profile["executor"] == "slurm" and "gpu=local" in profile["set-resource-scopes"]


# --- the GPU model: what the pinned executor makes of the resources a benchmark job declares ----------------------


def _sbatch(config: dict, rule: str = "inference_group", threads: int = 8, mem_mb: int = 64000) -> str:
    """The sbatch command the pinned SLURM executor builds for one benchmark job of `config`, from the resources
    the benchmark rules declare (gpu=1, slurm_extra, gpu_model, constraint, runtime; threads and mem_mb from the
    profile), through the executor's own functions as its run_job calls them. Unset (None) resources are left out,
    as Snakemake's Rule.expand_resources leaves them out of a job's resources."""
    from snakemake.iocontainers import ResourceList
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string
    from snakemake_executor_plugin_slurm.validation import validate_slurm_extra

    declared = {
        "runtime": cluster.runtime_minutes(config, rule),
        "slurm_extra": cluster.slurm_extra(config),
        "gpu": 1,
        "gpu_model": cluster.gpu_model(config),
        "constraint": cluster.constraint(config),
        "mem_mb": mem_mb,
        "_cores": threads,
    }
    resources = ResourceList(fromdict={k: v for k, v in declared.items() if v is not None})
    job = SimpleNamespace(resources=resources, threads=threads, name=rule)
    validate_slurm_extra(job)  # the executor refuses GPU or constraint options in slurm_extra
    params = {
        "run_uuid": "RUN",
        "slurm_logfile": "LOG",
        "comment_str": f"rule_{rule}",
        "account": "-A ACCOUNT",
        "partition": "-p PARTITION",
        "workdir": "/work",
    }
    return get_submit_command(job, params) + set_gres_string(job)


def test_the_gpu_model_and_features_are_unset_by_default():
    config = _config()
    assert config["cluster"] == {"pairing": "any", "share_nodes": False, "gpu_type": None, "constraint": None}
    assert cluster.gpu_model(config) is None and cluster.constraint(config) is None
    command = _sbatch(config).split()
    assert command.count("--gpus=1") == 1 and "--exclusive" in command
    assert not any(option.startswith(("--gres", "-C", "--constraint")) for option in command)


def test_a_gpu_type_asks_for_one_gpu_of_that_model_and_keeps_the_node_exclusive():
    config = _config(cluster={"gpu_type": "h100"})
    assert cluster.gpu_model(config) == "h100"
    command = _sbatch(config).split()
    gpu_options = [o for o in command if o.startswith(("--gpus", "--gres", "--gpus-per"))]
    assert gpu_options == ["--gpus=h100:1"], "one GPU, of the model asked for, requested once"
    assert "--exclusive" in command and "--cpus-per-task=8" in command
    assert command[command.index("--mem") + 1] == "64000"
    assert command[command.index("-t") + 1] == str(cluster.runtime_minutes(config, "inference_group"))
    shared = _sbatch(_config(cluster={"gpu_type": "a100", "share_nodes": True})).split()
    assert [o for o in shared if o.startswith("--gpus")] == ["--gpus=a100:1"] and "--exclusive" not in shared


def test_a_constraint_becomes_sbatch_C_beside_the_gpu():
    command = _sbatch(_config(cluster={"constraint": "h100&ib"}))
    assert " -C 'h100&ib' " in command and command.count("--gpus=") == 1 and "--gpus=1" in command
    both = _sbatch(_config(cluster={"gpu_type": "h100", "constraint": "ib"}))
    assert " -C ib " in both and "--gpus=h100:1" in both and "--exclusive" in both


@pytest.mark.parametrize(
    "cluster_section, key",
    [({"gpu_type": "h100:2"}, "gpu_type"), ({"gpu_type": "'h100'"}, "gpu_type"), ({"constraint": "a b"}, "constraint")],
)
def test_a_gpu_type_the_executor_would_refuse_is_a_config_error(cluster_section, key):
    """The executor's own pattern for a GPU model (letters, digits, _ and .): a count or quotes inside the name
    would stop the study at its first submission, not before it."""
    with pytest.raises(ConfigError, match=rf"cluster\.{key}"):
        _config(cluster=cluster_section)


def test_every_rule_that_asks_for_a_gpu_asks_for_the_studys_gpu_model():
    """The device check, the peak-FLOP probe and every cell must run on the model asked for: a probe on another
    model than the cells would give their MFU a wrong peak, and cells on two models cannot be compared."""
    import re

    from tests.conftest import REPO

    rules = REPO / "workflow" / "rules"
    common = (rules / "common.smk").read_text()
    assert re.search(r"^GPU_MODEL = cluster\.gpu_model\(config\)$", common, flags=re.M)
    assert re.search(r"^GPU_CONSTRAINT = cluster\.constraint\(config\)$", common, flags=re.M)
    blocks = []
    for path in sorted(rules.glob("*.smk")):
        for block in re.findall(r"^( +)resources:\n((?:\1 +.*\n)+)", path.read_text(), flags=re.M):
            # parity_logits computes on a GPU only in a study without the inference suite (else it reads the cells)
            if re.search(r"\bgpu=(1|0 if PARITY_FROM_CELLS else 1)\b", block[1]):
                blocks.append((path.name, block[1]))
    assert len(blocks) >= 6, "device_check, device_peak, parity_logits, inference, micro and training rules"
    for name, block in blocks:
        assert "gpu_model=GPU_MODEL," in block and "constraint=GPU_CONSTRAINT," in block, f"{name}:\n{block}"
