"""A local directory of class sub-folders, laid out as torchvision's and Hugging Face's `imagefolder` expect.

Two layouts are read: `ROOT/<split dir>/<class>/...` when the configured split directories exist, otherwise
`ROOT/<class>/...` with a seeded, per-file hash split (a file's split never changes when others are added). Classes are
the sorted union of class directory names, so label i is the i-th name as in torchvision's ImageFolder. Every regular
file is a candidate: what is not a usable image is skipped later with its reason, not silently ignored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FolderSplit:
    keys: list[str]  # paths relative to the dataset root: what the manifest's skip list names
    paths: list[str]
    labels: list[int]


def _files(directory: Path) -> list[Path]:
    return sorted(
        p
        for p in directory.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(directory).parts)
    )


def _class_dirs(directory: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(directory.iterdir()) if p.is_dir() and not p.name.startswith(".")}


def _in_val(relative: str, seed: int, fraction: float) -> bool:
    digest = hashlib.sha256(f"{seed}:{relative}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64 < fraction


def scan(root: str | Path, splits: dict[str, str], *, val_fraction: float, seed: int):
    """Returns (class names, {split: FolderSplit}, layout description)."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"dataset.path = {str(root)!r}: not a directory")
    split_dirs = {split: root / name for split, name in splits.items()}
    present = [split for split, directory in split_dirs.items() if directory.is_dir()]
    if present and len(present) != len(split_dirs):
        missing = sorted(str(split_dirs[s]) for s in split_dirs if s not in present)
        raise ValueError(f"dataset.path = {str(root)!r}: has some split directories but not {missing}")
    if present:
        by_split = {split: _class_dirs(directory) for split, directory in split_dirs.items()}
        layout = f"split directories {dict(splits)}"
    else:
        classes = _class_dirs(root)
        by_split = {split: classes for split in splits}
        layout = f"class directories at the root, val split = files whose seeded hash < {val_fraction}"
    names = sorted(set().union(*by_split.values()))
    if not names:
        raise ValueError(f"dataset.path = {str(root)!r}: no class sub-directories found")
    index = {name: i for i, name in enumerate(names)}
    result = {split: FolderSplit([], [], []) for split in splits}
    for split, classes in by_split.items():
        for name, directory in classes.items():
            for path in _files(directory):
                relative = path.relative_to(root).as_posix()
                if not present and _in_val(relative, seed, val_fraction) != (split == "val"):
                    continue
                result[split].keys.append(relative)
                result[split].paths.append(str(path))
                result[split].labels.append(index[name])
    return names, result, layout
