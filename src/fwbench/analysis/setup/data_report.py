"""The paper's data section: where the images came from (dataset table) and whether the loader keeps up (loader
table, figure and the macros quoted in the text)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import escape, number, stacked_header
from fwbench.analysis.common.names import model_in_text, variant_name
from fwbench.analysis.common.partners import cell_mode
from fwbench.analysis.inference.figures import save_figure

TARGET_FACTOR = 3.0  # the loader must sustain this multiple of the fastest consumer


def _origin(manifest: dict[str, Any]) -> str:
    origin, config = manifest["origin"], manifest["config"]
    if manifest["source"] == "synthetic":
        return f"synthetic (seed {config['seed']}, noise {config['noise']})"
    if manifest["source"] == "imagefolder":
        return f"image folder {origin['path']}"
    revision = origin.get("revision") or "unpinned"
    return f"Hugging Face {origin['name']} (revision {revision})"


def dataset_table(manifest: dict[str, Any], timing: dict[str, Any]) -> str:
    """Source, splits, counts, resolution, skipped files (by reason) and checksums, from the manifest."""
    skipped_reasons = Counter(s["reason"].split(":")[0].split(" (")[0] for s in manifest["skipped"])
    geometry = manifest.get("geometry") or "generated at the resolution"
    rows = [
        ("Source", escape(_origin(manifest))),
        ("Classes", str(manifest["num_classes"])),
        ("Resolution", f"{manifest['image_size']}$\\times${manifest['image_size']} px, uint8 RGB"),
        ("Geometry", escape(geometry)),
    ]
    for split, entry in manifest["splits"].items():
        per_class = entry["per_class"]
        rows.append(
            (
                f"Split {escape(split)}",
                f"{entry['count']:,} images ({len(entry['shards'])} shards), {min(per_class):,}--{max(per_class):,} "
                f"per class, {manifest['skipped_count'].get(split, 0)} skipped".replace(",", "{,}"),
            )
        )
        rows.append((f"sha256 {escape(split)}", rf"\texttt{{{entry['sha256'][:16]}}}\ldots"))
    rows.append(
        (
            "Skipped",
            escape(", ".join(f"{n} {reason}" for reason, n in sorted(skipped_reasons.items())) or "none"),
        )
    )
    modes = ", ".join(f"{mode} {n}" for mode, n in manifest["source_modes"].items())
    rows.append(("Source modes", escape(modes)))
    rows.append(
        (
            "Preprocessing",
            f"{number(timing['images_per_s'])} img/s with {timing['workers']} worker(s) "
            f"({number(timing['seconds'])} s)",
        )
    )
    lines = [r"\begin{tabular}{l p{0.68\columnwidth}}", r"\toprule"]
    lines += [rf"{key} & {value} \\" for key, value in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def fastest_consumer(frame: pd.DataFrame) -> tuple[float | None, str]:
    """The fastest successful inference cell, named with its execution mode (compiled PyTorch may be the fastest
    where eager PyTorch is not): a training step does at least its work, so a loader that keeps up with it keeps up
    with every training cell."""
    ok = frame[frame["status"] == "ok"]
    if ok.empty:
        return None, "no successful cell"
    best = ok.loc[ok["throughput_img_s"].idxmax()]
    variant = variant_name(best["framework"], cell_mode(best), alone=False)
    name = f"{variant} on {model_in_text(best['model'])} at batch {best['batch_size']}"
    return float(best["throughput_img_s"]), name


def loader_table(loader: dict[str, Any], frame: pd.DataFrame) -> str:
    reference, _ = fastest_consumer(frame)
    lines = [
        r"\begin{tabular}{r r r r r}",
        r"\toprule",
        # Two-line headers: the table fits its column at 8 pt.
        r"\textbf{Batch} & \textbf{img/s} & "
        + " & ".join(
            [
                stacked_header("wait p50", "(ms)"),
                stacked_header("wait p95", "(ms)"),
                stacked_header(r"$\times$ fastest", "cell"),
            ]
        )
        + r" \\",
        r"\midrule",
    ]
    for row in loader["rows"]:
        ratio = row["img_s"] / reference if reference else None
        lines.append(
            f"{row['batch_size']} & {number(row['img_s'])} & {number(row['wait_ms']['p50'])} & "
            f"{number(row['wait_ms']['p95'])} & {number(ratio)} \\\\"
        )
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def loader_macros(loader: dict[str, Any], frame: pd.DataFrame) -> dict[str, str]:
    reference, cell = fastest_consumer(frame)
    slowest = min(row["img_s"] for row in loader["rows"])
    ratio = slowest / reference if reference else None
    settings = loader["loader"]
    return {
        "fwbLoaderMinImgS": number(slowest),
        "fwbLoaderFastestCell": number(reference),
        "fwbLoaderFastestCellName": escape(cell),
        "fwbLoaderRatio": number(ratio),
        "fwbLoaderTarget": number(TARGET_FACTOR, 2),
        "fwbLoaderMeetsTarget": "meets" if ratio is not None and ratio >= TARGET_FACTOR else "does not meet",
        "fwbLoaderPrefetch": str(settings["prefetch"]),
        "fwbLoaderWorkers": str(settings["workers"]),
    }


def loader_figure(loader: dict[str, Any], frame: pd.DataFrame, pdf: str | Path, png: str | Path) -> None:
    """Loader img/s per batch size against the fastest cell and the 3x target line."""
    import matplotlib.pyplot as plt

    from fwbench.analysis.common.style import paper_theme

    paper_theme(font_scale=0.9)
    reference, cell = fastest_consumer(frame)
    rows = pd.DataFrame(loader["rows"])
    fig, ax = plt.subplots(figsize=(3.4, 2.4))
    positions = range(len(rows))
    ax.bar(positions, rows["img_s"], color="#6a9955", label="loader (no consumer)")
    ax.set_xticks(list(positions), [str(b) for b in rows["batch_size"]])
    if reference:
        ax.axhline(reference, color="#333333", linestyle="--", linewidth=1, label=f"fastest cell ({cell})")
        ax.axhline(
            TARGET_FACTOR * reference, color="#c0392b", linestyle=":", linewidth=1.2, label=f"target {TARGET_FACTOR:g}×"
        )
    ax.set_yscale("log")
    ax.set_xlabel("batch size")
    ax.set_ylabel("images/s")
    shape = "×".join(str(v) for v in loader["image_shape"][:2])
    ax.set_title(f"loader, {shape} px, prefetch {loader['loader']['prefetch']}", fontsize=8)
    ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    save_figure(fig, pdf, png)
    plt.close(fig)
