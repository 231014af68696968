from __future__ import annotations

import subprocess

import yaml

from fwbench.results import load_result


def _config(tmp_path, tiny_config):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(tiny_config))
    return path


def test_run_cell_by_hand(tmp_path, tiny_config, venv_bin):
    config = _config(tmp_path, tiny_config)
    out = tmp_path / "cell.json"
    proc = subprocess.run(
        [
            str(venv_bin / "fwbench"),
            "run-cell",
            "--suite",
            "inference",
            "--framework",
            "jax",
            "--model",
            "small_cnn",
            "--precision",
            "fp32",
            "--batch-size",
            "3",
            "--config",
            str(config),
            "--out",
            str(out),
            "--threads",
            "1",
            "--results",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    result = load_result(out)
    assert result["status"] == "ok"
    assert result["cell"] == {
        "suite": "inference",
        "framework": "jax",
        "model": "small_cnn",
        "precision": "fp32",
        "batch_size": 3,
        "image_size": 16,
    }
    assert "img/s" in proc.stdout
    assert (tmp_path / "results" / "data" / "manifest.json").exists()
    assert (tmp_path / "results" / "weights" / "small_cnn.npz").exists()


def test_run_cell_rejects_bad_values_with_one_line(tmp_path, tiny_config, venv_bin):
    config = _config(tmp_path, tiny_config)
    proc = subprocess.run(
        [
            str(venv_bin / "fwbench"),
            "run-cell",
            "--suite",
            "inference",
            "--framework",
            "torch",
            "--model",
            "vgg99",
            "--precision",
            "fp32",
            "--batch-size",
            "1",
            "--config",
            str(config),
            "--out",
            str(tmp_path / "x.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("fwbench: config error: models[0] = 'vgg99': unknown value, expected one of [")
    assert not (tmp_path / "x.json").exists()


def test_check_config_lists_cells(tmp_path, tiny_config, venv_bin):
    proc = subprocess.run(
        [str(venv_bin / "fwbench"), "check-config", "--config", str(_config(tmp_path, tiny_config))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert "4 cells" in proc.stdout and "results/cells/inference/torch/small_cnn/fp32/bs2.json" in proc.stdout


def test_prepare_data(tmp_path, tiny_config, venv_bin):
    proc = subprocess.run(
        [
            str(venv_bin / "fwbench"),
            "prepare-data",
            "--config",
            str(_config(tmp_path, tiny_config)),
            "--out",
            str(tmp_path / "data"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "train 32, val 16" in proc.stdout
