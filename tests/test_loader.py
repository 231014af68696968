"""The shared loader: one order per (seed, epoch), the same bytes for every framework, prefetch that changes
nothing but timing, and shards that read as one array."""

from __future__ import annotations

import numpy as np
import pytest

from fwbench.data.inputs import normalize
from fwbench.data.loader import Loader
from fwbench.data.prepare import prepare
from fwbench.data.store import ShardedImages, load_split
from fwbench.data.throughput import measure_loader
from fwbench.study.config import validate_config


@pytest.fixture
def sharded(tmp_path, tiny_config):
    tiny_config["dataset"].update(train_size=37, shard_size=8)
    dataset = validate_config(tiny_config)["dataset"]
    prepare(dataset, tmp_path)
    return load_split(tmp_path, "train")


def test_shards_read_as_one_array(sharded):
    images, labels = sharded
    assert len(images.shards) == 5 and images.shape == (37, 16, 16, 3) and len(labels) == 37
    whole = np.concatenate([np.asarray(s) for s in images.shards])
    index = np.array([36, 0, 8, 7, 7, 15, 16, -1])
    assert np.array_equal(images[index], whole[index])
    assert np.array_equal(images[3:20:4], whole[3:20:4])
    assert np.array_equal(images[9], whole[9]) and np.array_equal(np.asarray(images), whole)
    with pytest.raises(IndexError):
        images[np.array([37])]


def test_epoch_order_is_a_seeded_permutation(sharded):
    images, labels = sharded
    loader = Loader(images, labels, 8, seed=5)
    first, again = loader.batch_indices(0), Loader(images, labels, 8, seed=5).batch_indices(0)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert len(first) == 4 and len(np.unique(np.concatenate(first))) == 32  # drop_last: 37 -> 4 full batches
    assert not np.array_equal(np.concatenate(first), np.concatenate(loader.batch_indices(1)))
    assert not np.array_equal(np.concatenate(first), np.concatenate(Loader(images, labels, 8, seed=6).batch_indices(0)))
    keep = Loader(images, labels, 8, seed=5, drop_last=False)
    assert len(keep) == 5 and sorted(np.concatenate(keep.batch_indices(0))) == list(range(37))


@pytest.mark.parametrize(("prefetch", "workers"), [(0, 1), (1, 1), (3, 2)])
def test_prefetch_changes_timing_not_batches(sharded, prefetch, workers):
    images, labels = sharded
    loader = Loader(images, labels, 8, seed=1, prefetch=prefetch, workers=workers, drop_last=False)
    batches = list(loader.epoch(2))
    assert [b.number for b in batches] == list(range(5))
    for batch, index in zip(batches, loader.batch_indices(2), strict=True):
        assert np.array_equal(batch.images, normalize(np.asarray(images)[index]))
        assert np.array_equal(batch.labels, labels[index]) and batch.wait_s >= 0.0


def test_both_frameworks_see_identical_batches_in_identical_order(sharded):
    import jax
    import torch

    images, labels = sharded
    loader = Loader(images, labels, 8, seed=0)
    to_torch = [(torch.from_numpy(b.images.transpose(0, 3, 1, 2).copy()), b.labels) for b in loader.epoch(0)]
    to_jax = [(jax.device_put(b.images), b.labels) for b in loader.epoch(0)]
    assert len(to_torch) == len(to_jax) == 4
    for (t, tl), (j, jl) in zip(to_torch, to_jax, strict=True):
        assert np.array_equal(tl, jl)
        assert np.array_equal(t.numpy().transpose(0, 2, 3, 1), np.asarray(j))


def test_early_stop_leaves_no_thread_behind(sharded):
    import threading

    images, labels = sharded
    iterator = Loader(images, labels, 4, seed=0, prefetch=4, workers=2).epoch(0)
    next(iterator)
    iterator.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("fwbench-loader")]


def test_batch_larger_than_split_with_drop_last_is_refused(sharded):
    images, labels = sharded
    with pytest.raises(ValueError, match="batch size 64 exceeds the split's 37 images"):
        Loader(images, labels, 64, seed=0)


def test_loader_throughput_measures_every_batch_size(tmp_path, tiny_config):
    tiny_config["dataset"].update(train_size=64)
    config = validate_config(tiny_config)
    prepare(config["dataset"], tmp_path)
    result = measure_loader(tmp_path, [4, 16], {**config["loader"], "min_seconds": 0.2}, seed=0)
    assert [row["batch_size"] for row in result["rows"]] == [4, 16]
    for row in result["rows"]:
        assert row["seconds"] >= 0.2 and row["img_s"] > 0 and row["images"] == row["batches"] * row["batch_size"]
        assert row["wait_ms"]["n"] == row["batches"] >= 3
    assert result["split_images"] == 64 and result["image_shape"] == [16, 16, 3]


def test_sharded_images_need_a_shard():
    with pytest.raises(ValueError):
        ShardedImages([])


def test_nchw_layout_is_made_in_the_loader_threads(sharded):
    """PyTorch's NHWC->NCHW copy happens where the batch is prepared (off the timed step), identical bytes."""
    images, labels = sharded
    nhwc = list(Loader(images, labels, 8, seed=3, prefetch=2).epoch(0))
    nchw = list(Loader(images, labels, 8, seed=3, prefetch=2, layout="NCHW").epoch(0))
    for a, b in zip(nhwc, nchw, strict=True):
        assert b.images.shape == (8, 3, 16, 16) and b.images.flags["C_CONTIGUOUS"]
        assert np.array_equal(b.images, a.images.transpose(0, 3, 1, 2))
    with pytest.raises(ValueError, match="layout 'CHWN'"):
        Loader(images, labels, 8, seed=0, layout="CHWN")


def test_partial_last_batch_is_padded_with_its_own_rows(sharded):
    """drop_last false + pad_last: every batch has the compiled shape; `valid` says how many rows are real."""
    images, labels = sharded
    loader = Loader(images, labels, 8, seed=2, drop_last=False, pad_last=True, prefetch=1)
    batches = list(loader.epoch(0))
    assert [b.valid for b in batches] == [8, 8, 8, 8, 5] and all(len(b.labels) == 8 for b in batches)
    last_rows = loader.batch_indices(0)[-1]
    assert len(last_rows) == 5 and np.array_equal(loader.batch_indices(0, padded=True)[-1], np.resize(last_rows, 8))
    assert np.array_equal(batches[-1].labels, labels[np.resize(last_rows, 8)])
