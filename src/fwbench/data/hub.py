"""Hugging Face datasets: fetched once into `resources/` by the download rule, then read offline by preprocessing.

`dataset.name` is a Hub id (`clane9/imagenet-100`) or a local directory written by `DatasetDict.save_to_disk`, the
way to bring a dataset to a machine without network. Images are read undecoded (`Image(decode=False)`), so the
preprocessing workers decode the original bytes themselves and skip what they cannot use.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fwbench.io import atomic_write_json


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "--", name.strip("/")).strip("-") or "dataset"


def cache_dir(dataset: Mapping[str, Any], resources: str | Path) -> Path:
    return Path(resources) / "datasets" / slug(dataset["name"])


def is_saved_to_disk(name: str) -> bool:
    path = Path(name)
    return (path / "dataset_dict.json").is_file() or (path / "dataset_info.json").is_file()


def _offline_help(name: str, why: str) -> str:
    return (
        f"dataset.name = {name!r}: cannot fetch it from the Hugging Face Hub ({why}). Provide it locally: on a "
        f"machine with network run `datasets.load_dataset({name!r}).save_to_disk(DIR)`, copy DIR here and set "
        "dataset.name to DIR; or set dataset.source: imagefolder with dataset.path pointing at a folder of class "
        "sub-directories"
    )


def open_dataset(dataset: Mapping[str, Any], resources: str | Path, *, offline: bool = False):
    """The DatasetDict, from a save_to_disk directory or the Hub cache under `resources/`; `offline` forbids the
    network (preprocessing reads what the download rule fetched)."""
    import datasets

    name = dataset["name"]
    if is_saved_to_disk(name):
        loaded = datasets.load_from_disk(name)
        return loaded if isinstance(loaded, datasets.DatasetDict) else datasets.DatasetDict({"train": loaded})
    offline = offline or datasets.config.HF_HUB_OFFLINE
    try:
        with _offline_mode(offline):
            return datasets.load_dataset(
                name, revision=dataset.get("revision"), cache_dir=str(cache_dir(dataset, resources))
            )
    except ConnectionError as error:
        why = "offline mode (HF_DATASETS_OFFLINE=1, or preprocessing what the download rule fetched)"
        why = why if offline else "no network"
        raise ValueError(_offline_help(name, f"{why}: {error}")) from None
    except FileNotFoundError as error:
        raise ValueError(_offline_help(name, f"not found: {error}")) from None


@contextlib.contextmanager
def _offline_mode(offline: bool) -> Iterator[None]:
    """datasets and huggingface_hub read their offline switches at import; set both for the duration of a call."""
    import datasets
    import huggingface_hub.constants as hub_constants

    saved = (datasets.config.HF_HUB_OFFLINE, datasets.config.HF_DATASETS_OFFLINE, hub_constants.HF_HUB_OFFLINE)
    if offline:
        datasets.config.HF_HUB_OFFLINE = datasets.config.HF_DATASETS_OFFLINE = hub_constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, datasets.config.HF_DATASETS_OFFLINE, hub_constants.HF_HUB_OFFLINE = saved


def describe(dataset: Mapping[str, Any], loaded) -> dict[str, Any]:
    """Where the data came from, as the manifest and the paper record it."""
    splits = {
        split: {"num_rows": loaded[split].num_rows, "fingerprint": loaded[split]._fingerprint} for split in loaded
    }
    any_split = next(iter(loaded.values()))
    info = any_split.info
    return {
        "name": dataset["name"],
        "revision": dataset.get("revision") or ("local save_to_disk" if is_saved_to_disk(dataset["name"]) else None),
        "hub_revision": getattr(info, "config_name", None),
        "available_splits": splits,
        "features": {k: str(v) for k, v in any_split.features.items()},
    }


def download(dataset: Mapping[str, Any], resources: str | Path, record: str | Path) -> dict[str, Any]:
    """The download rule: fetch (or find) the dataset and record what was fetched."""
    loaded = open_dataset(dataset, resources)
    check_columns(dataset, loaded)
    described = describe(dataset, loaded)
    atomic_write_json(record, described)
    return described


def check_columns(dataset: Mapping[str, Any], loaded) -> None:
    for split in dataset["splits"].values():
        if split not in loaded:
            raise ValueError(f"dataset.splits names {split!r}, but {dataset['name']!r} has splits {sorted(loaded)}")
        columns = loaded[split].column_names
        for key in ("image_column", "label_column"):
            if dataset[key] not in columns:
                raise ValueError(
                    f"dataset.{key} = {dataset[key]!r}: split {split!r} of {dataset['name']!r} has columns {columns}"
                )


def class_names(dataset: Mapping[str, Any], loaded) -> list[str]:
    import datasets

    split = loaded[next(iter(dataset["splits"].values()))]
    feature = split.features[dataset["label_column"]]
    if isinstance(feature, datasets.ClassLabel):
        return list(feature.names)
    count = max(int(max(loaded[s][dataset["label_column"]])) for s in dataset["splits"].values()) + 1
    return [str(i) for i in range(count)]


class RowReader:
    """Undecoded image bytes of one split by row index; built inside each preprocessing worker."""

    def __init__(self, dataset: Mapping[str, Any], resources: str | Path, split: str):
        import datasets

        loaded = open_dataset(dataset, resources, offline=True)[split]
        self.column = dataset["image_column"]
        self.rows = loaded.cast_column(self.column, datasets.Image(decode=False))

    def __call__(self, index: int) -> bytes | str:
        value = self.rows[int(index)][self.column]
        if isinstance(value, dict):
            if value.get("bytes"):
                return value["bytes"]
            if value.get("path"):
                return value["path"]
        if isinstance(value, (bytes, str)):
            return value
        raise ValueError(f"row {index}: no image bytes or path in column {self.column!r}")
