"""Real-image sources: an image folder with odd files, a Hugging Face dataset built locally, torchvision geometry."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fwbench.data import hub
from fwbench.data.images import load_image
from fwbench.data.prepare import prepare
from fwbench.data.store import load_split, read_manifest
from fwbench.study.config import ConfigError, validate_config


def _photo(seed: int, size=(48, 40)) -> Image.Image:
    """A smooth, photo-like RGB image (gradients plus noise), so JPEG and resizing behave as on real photos."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0 : size[1], 0 : size[0]]
    base = np.stack([xx * rng.uniform(1, 5), yy * rng.uniform(1, 5), (xx + yy) * rng.uniform(1, 3)], -1)
    return Image.fromarray(np.clip(base + rng.normal(0, 10, base.shape), 0, 255).astype(np.uint8), "RGB")


def _jpeg(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _write(path: Path, data: bytes | Image.Image, fmt: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        data.save(path, format=fmt)


def make_odd_folder(root: Path, *, empty_class: bool) -> None:
    """train/cat holds every awkward case; dog is ordinary; an optional class directory with nothing in it."""
    cat = root / "train" / "cat"
    _write(cat / "a_rgb.jpg", _jpeg(_photo(0)))
    _write(cat / "b_gray.png", _photo(1).convert("L"), "PNG")
    _write(cat / "c_cmyk.jpg", _photo(2).convert("CMYK"), "JPEG")
    _write(cat / "d_rgba.png", _photo(3).convert("RGBA"), "PNG")
    _write(cat / "e_palette.gif", _photo(4).convert("P"), "GIF")
    full = _jpeg(_photo(5))
    _write(cat / "f_truncated.jpg", full[: len(full) // 2])
    _write(cat / "g_notes.txt", b"not an image\n")
    _write(cat / "h_empty.jpg", b"")
    for i in range(2):
        _write(root / "train" / "dog" / f"{i}.jpg", _jpeg(_photo(10 + i, size=(40, 64))))
    _write(root / "val" / "cat" / "0.jpg", _jpeg(_photo(20)))
    _write(root / "val" / "dog" / "0.png", _photo(21), "PNG")
    (root / "train" / ".hidden").mkdir(parents=True, exist_ok=True)  # ignored, as torchvision does
    if empty_class:
        (root / "train" / "bird").mkdir(parents=True)


def folder_config(root: Path, num_classes: int, **extra) -> dict:
    dataset = {"source": "imagefolder", "path": str(root), "image_size": 16, "num_classes": num_classes, **extra}
    return validate_config(
        {
            "frameworks": ["torch"],
            "models": ["small_cnn"],
            "precisions": ["fp32"],
            "dataset": dataset,
            "inference": {"batch_sizes": [1]},
        }
    )["dataset"]


def test_image_folder_skips_odd_files_with_reasons(tmp_path):
    make_odd_folder(tmp_path / "photos", empty_class=False)
    manifest = prepare(folder_config(tmp_path / "photos", 2), tmp_path / "out", progress=False)
    assert manifest["class_names"] == ["cat", "dog"]
    assert manifest["splits"]["train"]["per_class"] == [5, 2]
    assert manifest["splits"]["val"]["per_class"] == [1, 1]
    reasons = {s["file"]: s["reason"] for s in manifest["skipped"]}
    assert set(reasons) == {"train/cat/f_truncated.jpg", "train/cat/g_notes.txt", "train/cat/h_empty.jpg"}
    assert reasons["train/cat/f_truncated.jpg"].startswith("truncated image")
    assert reasons["train/cat/g_notes.txt"].startswith("not an image")
    assert reasons["train/cat/h_empty.jpg"].startswith("not an image")
    assert manifest["skipped_count"] == {"train": 3, "val": 0}
    assert manifest["source_modes"] == {"CMYK": 1, "L": 1, "P": 1, "RGB": 5, "RGBA": 1}
    images, labels = load_split(tmp_path / "out", "train")
    assert images.shape == (7, 16, 16, 3) and images.dtype == np.uint8
    assert labels.tolist() == [0, 0, 0, 0, 0, 1, 1]  # sorted by class, then file name
    gray = np.asarray(images[1], np.int16)
    assert (gray[..., 0] == gray[..., 1]).all() and (gray[..., 1] == gray[..., 2]).all()
    assert json.loads((tmp_path / "out" / "manifest.json").read_text()) == read_manifest(tmp_path / "out")


def test_class_without_usable_image_is_an_error(tmp_path):
    make_odd_folder(tmp_path / "photos", empty_class=True)
    with pytest.raises(ValueError, match=r"class 'bird' has no usable image"):
        prepare(folder_config(tmp_path / "photos", 3), tmp_path / "out", progress=False)


def test_split_without_usable_image_is_an_error(tmp_path):
    for split in ("train", "val"):
        for name in ("cat", "dog"):
            _write(tmp_path / "photos" / split / name / "x.jpg", b"\xff\xd8 broken")
    with pytest.raises(ValueError, match=r"split 'train' has no usable image \(2 candidates"):
        prepare(folder_config(tmp_path / "photos", 1 + 1), tmp_path / "out", progress=False)


def test_class_count_must_match_the_config(tmp_path):
    make_odd_folder(tmp_path / "photos", empty_class=False)
    with pytest.raises(ValueError, match=r"dataset.num_classes = 5, but dataset.path .* has 2 classes"):
        prepare(folder_config(tmp_path / "photos", 5), tmp_path / "out", progress=False)


def test_flat_folder_is_split_by_seeded_hash(tmp_path):
    for c in ("a", "b"):
        for i in range(30):
            _write(tmp_path / "flat" / c / f"{i}.png", _photo(i), "PNG")
    manifest = prepare(folder_config(tmp_path / "flat", 2, val_fraction=0.3), tmp_path / "out", progress=False)
    train, val = manifest["splits"]["train"]["count"], manifest["splits"]["val"]["count"]
    assert train + val == 60 and 8 <= val <= 30
    again = prepare(folder_config(tmp_path / "flat", 2, val_fraction=0.3), tmp_path / "again", progress=False)
    assert again["splits"]["val"]["sha256"] == manifest["splits"]["val"]["sha256"]


def test_shards_are_byte_identical_for_any_worker_count(tmp_path):
    make_odd_folder(tmp_path / "photos", empty_class=False)
    config = folder_config(tmp_path / "photos", 2, shard_size=3)
    one = prepare(config, tmp_path / "one", workers=1, progress=False)
    prepare(config, tmp_path / "two", workers=2, progress=False)
    assert len(one["splits"]["train"]["shards"]) == 3  # 7 images in shards of 3
    files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "two").iterdir())
    files.remove("preprocess.json")  # the timing of the run, which is all that may differ
    for name in files:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name


def test_geometry_equals_torchvision_resize_and_center_crop():
    from torchvision import transforms

    for size in ((48, 40), (40, 64), (33, 97), (32, 32)):
        image = _photo(7, size=size)
        actual, mode = load_image(_jpeg(image), 36, 32)
        decoded = Image.open(io.BytesIO(_jpeg(image))).convert("RGB")
        expected = np.asarray(transforms.Compose([transforms.Resize(36), transforms.CenterCrop(32)])(decoded))
        assert mode == "RGB" and np.array_equal(actual, expected), size


def _hub_dataset(path: Path) -> None:
    import datasets

    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=["ant", "bee"])})

    def split(offset: int, broken: bool):
        images = [{"bytes": _jpeg(_photo(offset + i)), "path": None} for i in range(4)]
        if broken:
            images[2] = {"bytes": b"GIF89a broken", "path": None}
        return datasets.Dataset.from_dict({"image": images, "label": [0, 1, 0, 1]}, features=features)

    datasets.DatasetDict({"train": split(0, True), "validation": split(10, False)}).save_to_disk(str(path))


def test_hugging_face_dataset_saved_to_disk(tmp_path):
    _hub_dataset(tmp_path / "hub")
    dataset = folder_config(tmp_path, 2) | {"source": "huggingface", "name": str(tmp_path / "hub"), "path": None}
    dataset = validate_config(
        {
            "frameworks": ["torch"],
            "models": ["small_cnn"],
            "precisions": ["fp32"],
            "inference": {"batch_sizes": [1]},
            "dataset": {k: v for k, v in dataset.items() if k != "splits"},
        }
    )["dataset"]
    assert dataset["splits"] == {"train": "train", "val": "validation"}
    manifest = prepare(dataset, tmp_path / "out", resources=tmp_path / "resources", workers=2, progress=False)
    assert manifest["class_names"] == ["ant", "bee"]
    assert manifest["splits"]["train"]["per_class"] == [1, 2] and manifest["splits"]["val"]["count"] == 4
    assert [(s["file"], s["reason"].split(" (")[0]) for s in manifest["skipped"]] == [("train[2]", "not an image")]
    assert manifest["origin"]["available_splits"]["train"]["num_rows"] == 4
    images, _ = load_split(tmp_path / "out", "val")
    expected, _ = load_image(_jpeg(_photo(10)), 16, 16)
    assert np.array_equal(images[0], expected)


def test_offline_hub_dataset_names_it_and_how_to_provide_it(tmp_path, monkeypatch):
    dataset = {"name": "nobody/no-such-dataset", "revision": None}
    with pytest.raises(ValueError) as error:
        hub.open_dataset(dataset, tmp_path, offline=True)
    message = str(error.value)
    assert "dataset.name = 'nobody/no-such-dataset'" in message and "save_to_disk" in message
    assert "offline mode" in message and "imagefolder" in message


@pytest.mark.parametrize(
    ("dataset", "message"),
    [
        ({"source": "imagefolder"}, "dataset.path: required when dataset.source = 'imagefolder'"),
        ({"source": "imagefolder", "path": "/no/such/dir"}, "dataset.path = '/no/such/dir': not a directory"),
        ({"image_size": 32, "resize_size": 24}, "dataset.resize_size = 24: must be >= dataset.image_size (32)"),
        ({"source": "kaggle"}, "dataset.source = 'kaggle': unknown value"),
    ],
)
def test_dataset_config_errors(dataset, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        validate_config(
            {
                "frameworks": ["torch"],
                "models": ["small_cnn"],
                "precisions": ["fp32"],
                "dataset": dataset,
                "inference": {"batch_sizes": [1]},
            }
        )
