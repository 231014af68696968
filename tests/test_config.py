"""Config validation: every bad case stops with one line naming the key and the value."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from fwbench.study.config import ConfigError, load_schema, validate_config
from fwbench.study.files import load_config
from tests.conftest import REPO


def test_default_config_is_valid_and_defaults_are_filled():
    config = load_config(REPO / "config" / "config.yaml")
    assert config["frameworks"] == ["torch", "jax", "tensorflow"]
    assert config["suites"] == ["inference", "training", "micro"]
    assert config["training"]["models"] == ["small_cnn"]
    assert config["micro"]["batch_sizes"] == [1, 16, 256, 4096] and config["micro"]["trials"] == 3
    assert config["micro"]["hidden"] == 1024


def test_training_models_select_among_the_studys(tiny_config):
    from fwbench.study.grid import cells

    tiny_config["suites"] = ["inference", "training"]
    tiny_config["training"] = {"models": ["resnet50"]}
    notes = []
    config = validate_config(tiny_config, notes=notes)
    assert config["training"]["models"] == [] and config["suites"] == ["inference"], "resnet50 is not studied"
    assert notes == ["training.models = ['resnet50'] selects none of models ['small_cnn']: no training cells"]
    with pytest.raises(ConfigError, match=r"training.models = \['resnet50'\]: resnet50 not in models"):
        validate_config(tiny_config, strict={"training.models": "override.yaml"})
    tiny_config["models"] = ["small_cnn", "resnet50"]
    config = validate_config(tiny_config)
    trained = {cell.model for cell in cells(config) if cell.suite == "training"}
    timed = {cell.model for cell in cells(config) if cell.suite == "inference"}
    assert trained == {"resnet50"} and timed == {"small_cnn", "resnet50"}
    tiny_config["training"] = {}
    trained = {cell.model for cell in cells(validate_config(tiny_config)) if cell.suite == "training"}
    assert trained == {"small_cnn", "resnet50"}, "null trains every model"


def test_defaults_filled_for_omitted_keys(tiny_config):
    config = validate_config(tiny_config)
    assert config["dataset"]["source"] == "synthetic"
    assert config["dataset"]["noise"] == 0.35
    assert config["inference"]["max_iters"] == 100000 and config["inference"]["cold_inputs"] is False
    assert config["micro"]["operations"] == ["matmul", "mlp"] and config["micro"]["include_transfer"] is True
    assert config["training"]["batch_sizes"] == [32] and config["training"]["epochs"] == 2
    assert config["training"]["lr"] == 1e-4 and config["training"]["schedule"] == "cosine"
    assert config["loader"] == {"prefetch": 2, "workers": 1, "drop_last": True, "min_seconds": 0.2}
    assert config["dataset"]["splits"] == {"train": "train", "val": "val"}
    assert "source" not in tiny_config["dataset"], "validation must not mutate its input"


def _error(config) -> str:
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    message = str(info.value)
    assert "\n" not in message, "the error must be one line"
    return message


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c: c.update(models=["resnet999"]), r"models\[0\] = 'resnet999'.*unknown value"),
        (lambda c: c.update(frameworks=["torch", "mxnet"]), r"frameworks\[1\] = 'mxnet'.*unknown value"),
        (lambda c: c.update(precisions=["fp8"]), r"precisions\[0\] = 'fp8'"),
        (lambda c: c["inference"].update(batch_sizes=[8, 0]), r"inference\.batch_sizes\[1\] = 0: must be > 0"),
        (lambda c: c["inference"].update(batch_sizes=[-4]), r"inference\.batch_sizes\[0\] = -4: must be > 0"),
        (lambda c: c["inference"].update(batch_sizes=["8"]), r"inference\.batch_sizes\[0\] = '8': wrong type"),
        (lambda c: c["dataset"].update(image_size=32.5), r"dataset\.image_size = 32\.5: wrong type"),
        (lambda c: c["inference"].update(blocks=True), r"inference\.blocks = True: wrong type"),
        (lambda c: c["inference"].update(min_seconds=1.0), r"unknown key 'inference\.min_seconds'"),
        (lambda c: c.update(frameworks="torch"), r"frameworks = 'torch': wrong type"),
        (lambda c: c.update(colour="blue"), r"unknown key 'colour'"),
        (lambda c: c["dataset"].update(resolution=64), r"unknown key 'dataset\.resolution'"),
        (lambda c: c.update(models=[]), r"models = \[\]: must not be empty"),
        (lambda c: c["inference"].update(batch_sizes=[]), r"inference\.batch_sizes = \[\]: must not be empty"),
        (lambda c: c.pop("models"), r"missing required key 'models'"),
        (lambda c: c["inference"].update(blocks=0), r"inference\.blocks = 0: must be >= 1"),
        (lambda c: c.update(pretrained={"vgg16": "x.pth"}), r"unknown key 'pretrained\.vgg16'"),
        (
            lambda c: c.update(pretrained={"resnet50": "/absent/r50.pth"}),
            r"pretrained\.resnet50 = '/absent/r50\.pth': file",
        ),
    ],
)
def test_bad_config_names_key_and_value(tiny_config, mutate, expected):
    mutate(tiny_config)
    message = _error(tiny_config)
    assert message.startswith("config error: ")
    assert re.search(expected, message), message


def test_unreadable_config_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("frameworks: [torch\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_snakemake_stops_before_any_job_with_one_line(tmp_path, tiny_config, venv_bin):
    tiny_config["models"] = ["resnet999"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(tiny_config))
    proc = subprocess.run(
        [
            str(venv_bin / "snakemake"),
            "-n",
            "--configfile",
            str(path),
            "--directory",
            str(tmp_path),
            "--snakefile",
            str(REPO / "workflow" / "Snakefile"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "config error" in line]
    assert len(errors) == 1
    assert errors[0].startswith("fwbench: config error: models[0] = 'resnet999': unknown value, expected one of [")
    assert not (tmp_path / "results").exists()


def _schema_keys(schema, prefix=""):
    for name, sub in schema.get("properties", {}).items():
        key = f"{prefix}{name}"
        yield key
        yield from _schema_keys(sub, f"{key}.")


def test_readme_documents_every_key():
    readme = (REPO / "config" / "README.md").read_text()
    missing = [key for key in _schema_keys(load_schema()) if f"`{key}`" not in readme]
    assert not missing, f"config/README.md does not document: {missing}"


def test_schema_enums_match_the_package():
    from fwbench.backends import FRAMEWORKS
    from fwbench.backends.base import PRECISIONS
    from fwbench.models import MODELS
    from fwbench.scenarios.operations import OPERATIONS
    from fwbench.study.grid import MICRO_BASELINE

    props = load_schema()["properties"]
    assert set(props["models"]["items"]["enum"]) == set(MODELS)
    assert set(props["pretrained"]["propertyNames"]["enum"]) == set(MODELS)
    # NumPy is a framework of the micro suite only (its baseline), never one to list.
    assert set(props["frameworks"]["items"]["enum"]) == set(FRAMEWORKS) - {MICRO_BASELINE}
    assert set(props["micro"]["properties"]["operations"]["items"]["enum"]) == set(OPERATIONS)
    assert set(props["precisions"]["items"]["enum"]) == set(PRECISIONS)


def test_workflow_schema_is_the_package_schema():
    workflow_schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    assert workflow_schema == load_schema()
