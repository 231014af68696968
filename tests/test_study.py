"""Study files (fwbench.study.files): a file stands alone or names its base, values keep their source, narrowing keys
select among the study's own models, and errors name the key and the file."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from fwbench.study.config import ConfigError
from fwbench.study.files import DEFAULT_STUDY, SCHEMA_DEFAULT, load_config, resolve, show
from tests.conftest import REPO


@pytest.fixture
def in_repo(monkeypatch):
    """Paths in study files are relative to the working directory, as Snakemake's are: run from the repository."""
    monkeypatch.chdir(REPO)


def _write(path, values) -> str:
    path.write_text(yaml.safe_dump(values))
    return str(path)


def test_no_file_is_the_default_study(in_repo):
    study = resolve()
    assert [layer.label for layer in study.layers] == [DEFAULT_STUDY]
    assert study.config["study"] == "embedded-default" and study.config["inference"]["trials"] == 3
    assert study.source("inference.trials") == DEFAULT_STUDY
    assert study.source("inference.max_host_mb") == SCHEMA_DEFAULT


def test_a_study_file_stands_alone(in_repo, tmp_path):
    """Three lines are a complete study, from the schema's defaults and not from config/config.yaml."""
    path = _write(
        tmp_path / "three.yaml", {"models": ["vit_b_16"], "suites": ["inference"], "inference": {"batch_sizes": [4]}}
    )
    study = resolve([path])
    config = study.config
    assert config["frameworks"] == ["torch", "jax", "tensorflow"] and config["precisions"] == ["fp32"]
    assert config["inference"]["blocks"] == 12 and config["inference"]["burst_s"] == 0.2, "the schema's defaults"
    assert config["inference"]["burst_discard"] == 2, "the schema's default, not the default study's 1"
    assert config["training"]["models"] is None and config["mode_scope"]["models"] is None
    assert config["study"] == "default" and config["report"]["title"] is None
    assert study.source("models") == str(path) and study.source("inference.burst_discard") == SCHEMA_DEFAULT


def test_extends_names_a_base_merged_under_the_file(in_repo, tmp_path):
    path = _write(
        tmp_path / "ext.yaml",
        {"extends": DEFAULT_STUDY, "models": ["vit_b_16"], "inference": {"batch_sizes": [4]}},
    )
    study = resolve([path])
    config = study.config
    assert [layer.label for layer in study.layers] == [DEFAULT_STUDY, str(path)]
    assert config["inference"]["batch_sizes"] == [4] and config["inference"]["trials"] == 3, "mapping merged"
    assert config["models"] == ["vit_b_16"], "a list is replaced, not merged"
    assert study.source("inference.trials") == DEFAULT_STUDY and study.source("inference.batch_sizes") == str(path)
    assert "extends" not in config


def test_bases_chain_and_cycles_and_missing_bases_are_named(in_repo, tmp_path):
    first = _write(tmp_path / "first.yaml", {"extends": DEFAULT_STUDY, "seed": 7})
    second = _write(tmp_path / "second.yaml", {"extends": first, "models": ["small_cnn"]})
    study = resolve([second])
    assert [layer.label for layer in study.layers] == [DEFAULT_STUDY, first, second]
    assert study.config["seed"] == 7 and study.config["inference"]["trials"] == 3
    _write(tmp_path / "a.yaml", {"extends": str(tmp_path / "b.yaml"), "models": ["small_cnn"]})
    _write(tmp_path / "b.yaml", {"extends": str(tmp_path / "a.yaml"), "models": ["small_cnn"]})
    with pytest.raises(ConfigError, match="extends forms a cycle: .*a.yaml -> .*b.yaml -> .*a.yaml"):
        resolve([tmp_path / "a.yaml"])
    _write(tmp_path / "lost.yaml", {"extends": "config/absent.yaml", "models": ["small_cnn"]})
    with pytest.raises(ConfigError, match=r"extends = 'config/absent.yaml' in .*lost.yaml: file not found"):
        resolve([tmp_path / "lost.yaml"])


def test_files_merge_in_order_and_overrides_come_last(in_repo, tmp_path):
    one = _write(tmp_path / "one.yaml", {"models": ["small_cnn"], "seed": 1, "inference": {"trials": 2}})
    two = _write(tmp_path / "two.yaml", {"seed": 2})
    study = resolve([one, two], {"inference": {"trials": 4}})
    assert study.config["seed"] == 2 and study.config["inference"]["trials"] == 4
    assert study.source("seed") == two and study.source("inference.trials") == "--config"
    assert study.source("models") == one


def test_a_narrower_copy_of_the_default_study_needs_no_other_edit(in_repo, tmp_path):
    """A copy of config/config.yaml with `models: [resnet50]`: training.models and mode_scope.models select among
    the study's models, so the training suite (small CNN only) has no cells and PyTorch stays eager."""
    copy = yaml.safe_load((REPO / DEFAULT_STUDY).read_text())
    copy["models"] = ["resnet50"]
    study = resolve([_write(tmp_path / "copy.yaml", copy)])
    config = study.config
    assert config["training"]["models"] == [] and "training" not in config["suites"]
    assert config["mode_scope"]["models"] == []
    assert study.notes == ["training.models = ['small_cnn'] selects none of models ['resnet50']: no training cells"]
    from fwbench.study.grid import cells

    assert {cell.model for cell in cells(config) if cell.suite != "micro"} == {"resnet50"}


def test_an_inherited_narrowing_is_dropped_a_written_one_is_an_error(in_repo, tmp_path):
    base = _write(tmp_path / "base.yaml", {"models": ["resnet50", "vit_b_16"], "training": {"models": ["vit_b_16"]}})
    narrower = _write(tmp_path / "narrower.yaml", {"extends": base, "models": ["resnet50"]})
    assert resolve([narrower]).config["training"]["models"] == []
    wrong = _write(tmp_path / "wrong.yaml", {"extends": narrower, "training": {"models": ["vit_b_16"]}})
    with pytest.raises(ConfigError) as info:
        resolve([wrong])
    message = str(info.value)
    assert message == (
        "config error: training.models = ['vit_b_16']: vit_b_16 not in models (['resnet50']); training.models "
        f"selects among models (in {wrong})"
    )
    with pytest.raises(ConfigError, match=r"mode_scope.models = \['vit_b_16'\].*\(in --config\)"):
        resolve([narrower], {"mode_scope": {"models": ["vit_b_16"]}})
    # the same selection written beside its axis, by the same layer, narrows
    assert resolve([narrower], {"models": ["vit_b_16"], "training": {"models": ["vit_b_16"]}}).config["training"][
        "models"
    ] == ["vit_b_16"]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"models": ["vit_b16"]}, r"^config error: models\[0\] = 'vit_b16': unknown value, expected one of .* \(in "),
        (
            {"models": ["small_cnn"], "inference": {"batch_sizez": [4]}},
            r"^config error: unknown key 'inference.batch_sizez' \(allowed here: .*\) \(in ",
        ),
        ({"modles": ["small_cnn"]}, r"^config error: unknown key 'modles'"),
    ],
)
def test_a_typo_is_one_line_naming_the_key_and_the_file(in_repo, tmp_path, values, expected):
    path = _write(tmp_path / "typo.yaml", values)
    with pytest.raises(ConfigError) as info:
        resolve([path])
    message = str(info.value)
    assert "\n" not in message
    assert re.search(expected, message), message


def test_a_study_file_that_is_not_a_mapping_is_named(tmp_path):
    (tmp_path / "list.yaml").write_text("- models\n")
    with pytest.raises(ConfigError, match=r"list.yaml: a study is a mapping of keys to values, not a list"):
        load_config(tmp_path / "list.yaml")


def test_show_prints_every_value_with_its_source(in_repo, tmp_path):
    path = _write(tmp_path / "ext.yaml", {"extends": DEFAULT_STUDY, "models": ["resnet50"]})
    text = show(resolve([path]))
    lines = text.splitlines()
    assert lines[0] == f"# layers, later ones winning: {SCHEMA_DEFAULT} < {DEFAULT_STUDY} < {path}"
    assert any(line.startswith("# note: training.models = ['small_cnn'] selects none") for line in lines)
    rows = {line.split(":")[0]: line for line in lines if not line.startswith("#")}
    assert rows["models"].endswith(f"# {path}")
    assert rows["inference.trials"].endswith(f"# {DEFAULT_STUDY}")
    assert rows["inference.max_host_mb"].endswith(f"# {SCHEMA_DEFAULT}")
    assert rows["training.models"].endswith(f"# {DEFAULT_STUDY}, adjusted by validation")


def test_check_config_show_from_the_command_line(in_repo, tmp_path, venv_bin):
    path = _write(
        tmp_path / "three.yaml", {"models": ["vit_b_16"], "suites": ["inference"], "inference": {"batch_sizes": [4]}}
    )
    proc = subprocess.run(
        [str(venv_bin / "fwbench"), "check-config", "--config", path, "--set", "seed=5", "--show"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    first, *rest = proc.stdout.splitlines()
    assert first == (f"{path} + --config: valid, 3 cells (inference 3), 9 measuring processes (inference 9)")
    assert "seed: 5" in proc.stdout and any(line.startswith("seed: 5") and line.endswith("# --config") for line in rest)
