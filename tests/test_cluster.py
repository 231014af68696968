"""What a benchmark job asks a scheduler for (fwbench.cluster), from the study's configuration."""

from __future__ import annotations

import pytest

from fwbench import cluster
from fwbench.config import ConfigError, validate_config
from tests.conftest import TINY_CONFIG


def _config(**changes) -> dict:
    return validate_config({**TINY_CONFIG, "suites": ["inference", "training", "micro"], **changes})


def test_time_limits_follow_the_process_timeouts():
    """Two frameworks × 3 trials × (1 + 3 ladder rungs) processes of 120 s each = 48 min, plus the 10-minute margin;
    a training cell: (1 + 3) × its 3600 s; micro: NumPy and two frameworks × 1 trial × 4 × 600 s."""
    config = _config(inference={**TINY_CONFIG["inference"], "trials": 3})
    assert cluster.attempts(config) == 4
    assert cluster.runtime_minutes(config, "inference_group") == 48 + 10
    assert cluster.runtime_minutes(config, "training_cell") == 4 * 60 + 10
    assert cluster.runtime_minutes(config, "micro_group") == 3 * 4 * 10 + 10
    assert cluster.runtime_minutes(config, "device_check") == 2 * 5 + 10
    without_ladder = _config(fallbacks={"enabled": False})
    assert cluster.runtime_minutes(without_ladder, "training_cell") == 60 + 10
    with pytest.raises(ValueError, match="paper"):
        cluster.runtime_minutes(config, "paper")


def test_node_sharing_and_pairing_are_study_settings():
    config = _config()
    assert config["cluster"] == {"pairing": "any", "share_nodes": False}
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
    from fwbench.modes import MODES

    most = sum(len(MODES[framework]) for framework in ("torch", "jax", "tensorflow"))
    assert f"{group}={most}" in profile["group-components"]
    assert profile["executor"] == "slurm" and "gpu=local" in profile["set-resource-scopes"]
