from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from fwbench.data.inputs import IMAGENET_MEAN, IMAGENET_STD, batch_of, normalize
from fwbench.data.prepare import check_matches, prepare
from fwbench.data.store import dataset_files, load_split, read_manifest, split_digest
from fwbench.study.config import validate_config


def test_same_config_gives_byte_identical_files(tmp_path, tiny_config):
    dataset = validate_config(tiny_config)["dataset"]
    prepare(dataset, tmp_path / "a")
    prepare(dataset, tmp_path / "b")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    names.remove("preprocess.json")  # the run's timing
    assert dataset_files(tmp_path / "a") == [str(tmp_path / "a" / "manifest.json")]
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_other_seed_gives_other_images(tmp_path, tiny_config):
    dataset = validate_config(tiny_config)["dataset"]
    prepare(dataset, tmp_path / "a")
    prepare({**dataset, "seed": dataset["seed"] + 1}, tmp_path / "b")
    assert not np.array_equal(load_split(tmp_path / "a", "val")[0], load_split(tmp_path / "b", "val")[0])


def test_manifest_describes_the_arrays(tmp_path, tiny_config):
    dataset = validate_config(tiny_config)["dataset"]
    prepare(dataset, tmp_path)
    manifest = read_manifest(tmp_path)
    assert manifest["num_classes"] == 4 and manifest["config"]["seed"] == 3 and manifest["image_size"] == 16
    for split, count in (("train", 32), ("val", 16)):
        entry = manifest["splits"][split]
        images, labels = load_split(tmp_path, split)
        assert images.dtype == np.uint8 and images.shape == (count, 16, 16, 3) == tuple(entry["shape"])
        assert entry["count"] == count and sum(entry["per_class"]) == count
        assert entry["per_class"] == np.bincount(labels, minlength=4).tolist()
        for shard in entry["shards"]:
            for name, digest in shard["sha256"].items():
                assert hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() == digest
        assert entry["sha256"] == split_digest(entry)
    assert json.loads((tmp_path / "manifest.json").read_text()) == manifest


def test_images_are_learnable_well_above_chance(tmp_path):
    """A shift-invariant nearest-centroid classifier separates the classes, so a CNN can learn them."""
    config = {
        "image_size": 32,
        "num_classes": 10,
        "train_size": 400,
        "val_size": 200,
        "seed": 0,
        "noise": 0.35,
        "source": "synthetic",
        "shard_size": 2048,
    }
    prepare(config, tmp_path)
    (xt, yt), (xv, yv) = load_split(tmp_path, "train"), load_split(tmp_path, "val")

    def features(x):
        return np.abs(np.fft.fft2(np.asarray(x, np.float32) / 255, axes=(1, 2))).reshape(len(x), -1)

    ft, fv = features(xt), features(xv)
    centroids = np.stack([ft[yt == c].mean(0) for c in range(10)])
    accuracy = (np.argmin(((fv[:, None] - centroids[None]) ** 2).sum(-1), 1) == yv).mean()
    assert accuracy > 0.5, accuracy  # chance is 0.1
    raw = np.asarray(xv, np.float32).reshape(len(xv), -1)
    assert raw.std(axis=0).mean() > 10, "images must vary within a class, not be constant prototypes"


def test_dataset_mismatch_is_refused(tmp_path, tiny_config):
    dataset = validate_config(tiny_config)["dataset"]
    prepare(dataset, tmp_path)
    with pytest.raises(ValueError, match=r"dataset\.image_size = 16"):
        check_matches(read_manifest(tmp_path), {**dataset, "image_size": 32}, tmp_path)


def test_normalize_and_batches():
    images = np.full((3, 2, 2, 3), 255, np.uint8)
    out = normalize(images)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0, 0, 0], (1 - IMAGENET_MEAN) / IMAGENET_STD, rtol=1e-6)
    labelled = np.arange(3)[:, None, None, None] * np.ones((3, 2, 2, 3), np.uint8)
    assert batch_of(labelled, 5)[:, 0, 0, 0].tolist() == [0, 1, 2, 0, 1]
    with pytest.raises(ValueError):
        batch_of(labelled[:0], 1)
