from __future__ import annotations

import subprocess

import yaml

from fwbench.results import load_result


def _config(tmp_path, tiny_config):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(tiny_config))
    return path


def _fwbench(venv_bin, *args, timeout=300):
    return subprocess.run([str(venv_bin / "fwbench"), *map(str, args)], capture_output=True, text=True, timeout=timeout)


def _run_cell(venv_bin, config, out, framework, model, batch, *extra):
    return _fwbench(
        venv_bin,
        "run-cell",
        "--suite",
        "inference",
        "--framework",
        framework,
        "--model",
        model,
        "--precision",
        "fp32",
        "--batch-size",
        batch,
        "--config",
        config,
        "--out",
        out,
        *extra,
    )


def test_run_cell_by_hand(tmp_path, tiny_config, venv_bin):
    config = _config(tmp_path, tiny_config)
    out = tmp_path / "cell.json"
    proc = _run_cell(venv_bin, config, out, "jax", "small_cnn", 3, "--threads", 1, "--results", tmp_path / "results")
    assert proc.returncode == 0, proc.stderr
    result = load_result(out)
    assert result["status"] == "ok"
    assert result["cell"] == {
        "suite": "inference",
        "framework": "jax",
        "mode": "jit",
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
    proc = _run_cell(venv_bin, config, tmp_path / "x.json", "torch", "vgg99", 1)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("fwbench: config error: models[0] = 'vgg99': unknown value, expected one of [")
    assert not (tmp_path / "x.json").exists()
    proc = _run_cell(venv_bin, config, tmp_path / "x.json", "jax", "small_cnn", 1, "--mode", "eager")
    (line,) = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and line.startswith("fwbench: config error: modes.jax[0] = 'eager': unknown value")


def test_check_config_lists_cells(tmp_path, tiny_config, venv_bin):
    proc = subprocess.run(
        [str(venv_bin / "fwbench"), "check-config", "--config", str(_config(tmp_path, tiny_config))],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert "4 cells" in proc.stdout and "results/cells/inference/torch/eager/small_cnn/fp32/bs2.json" in proc.stdout


def test_prepare_data(tmp_path, tiny_config, venv_bin):
    proc = _fwbench(venv_bin, "prepare-data", "--config", _config(tmp_path, tiny_config), "--out", tmp_path / "data")
    assert proc.returncode == 0, proc.stderr
    assert "train 32, val 16, 0 skipped" in proc.stdout
    assert {p.name for p in (tmp_path / "data").iterdir()} == {
        "manifest.json",
        "preprocess.json",
        "train-00000-images.npy",
        "train-00000-labels.npy",
        "val-00000-images.npy",
        "val-00000-labels.npy",
    }


def test_prepare_data_from_an_image_folder(tmp_path, tiny_config, venv_bin):
    from tests.test_data_sources import make_odd_folder

    make_odd_folder(tmp_path / "photos", empty_class=False)
    tiny_config["dataset"] = {"source": "imagefolder", "path": str(tmp_path / "photos"), "num_classes": 2}
    config = _config(tmp_path, tiny_config)
    proc = _fwbench(venv_bin, "prepare-data", "--config", config, "--out", tmp_path / "data", "--workers", "2")
    assert proc.returncode == 0, proc.stderr
    assert "(imagefolder, train 7, val 2, 3 skipped" in proc.stdout
    assert "preprocess train" in proc.stderr  # the progress bar
    tiny_config["dataset"]["num_classes"] = 3
    proc = _fwbench(venv_bin, "prepare-data", "--config", _config(tmp_path, tiny_config), "--out", tmp_path / "x")
    assert proc.returncode == 2 and proc.stderr.startswith("fwbench: dataset.num_classes = 3, but dataset.path")
