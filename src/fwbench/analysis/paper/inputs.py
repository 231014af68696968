"""Everything the paper \\input{}s, written in one place so the workflow script stays a thin call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fwbench.analysis.common.detail import split_detail
from fwbench.analysis.common.latex import escape
from fwbench.analysis.failures.report import failure_macros, failures_table
from fwbench.analysis.inference.macros import macros
from fwbench.analysis.inference.ratio_macros import include_deviating
from fwbench.analysis.inference.tables import inference_table, ratios_table
from fwbench.analysis.inference.tidy import read_tidy
from fwbench.analysis.paper.failures import failure_summary
from fwbench.analysis.paper.inference import inference_results_section, modes_sentence
from fwbench.analysis.paper.training_section import training_section
from fwbench.analysis.setup.data_report import dataset_table, loader_macros, loader_table
from fwbench.analysis.setup.provenance import study_environment
from fwbench.analysis.setup.tables import environment_table, models_table
from fwbench.analysis.training.macros import training_macros
from fwbench.analysis.training.reference import read_published
from fwbench.io import atomic_write_text, read_json


def written_up_at(written_at: str | None, measured_at: str | None) -> str:
    """`\fwbWrittenAt`: the commit of the code writing the paper where it is not the code that measured the cells
    (the title then names both), else empty."""
    return escape(written_at) if written_at and written_at != measured_at else ""


def write_paper_inputs(
    *,
    csv: str | Path,
    speedups_csv: str | Path,
    mode_gains_csv: str | Path,
    cell_paths: Iterable[str | Path],
    facts: Iterable[str | Path],
    weights: Iterable[str | Path],
    manifest: str | Path,
    preprocess: str | Path,
    loader: str | Path,
    training: list[str | Path],
    config: Mapping[str, Any],
    outputs: Mapping[str, str],
    training_reference: str | Path | None = None,
    written_at: str | None = None,
) -> None:
    """`training_reference`: the published L4 training figures (reference/published-l4-training.csv) the training
    section sets the small-CNN cells beside; without it the section has no such table. `mode_gains_csv`: the
    compiled-over-eager gains (results/tables/mode_gains.csv). `written_at`: the commit of the code writing the
    paper (setup.provenance.commit_label); where it is not the code that measured the cells (results restored with
    `fwbench restore --report-only`), the paper names both (`\fwbWrittenAt`, empty otherwise)."""
    frame, ratios, gains = read_tidy(csv), read_tidy(speedups_csv), read_tidy(mode_gains_csv)
    env = study_environment(cell_paths)
    atomic_write_text(outputs["inference"], inference_table(frame, list(config["frameworks"]), ratios))
    # the body's results table (a column wide), with the sentence that points to it: a study without a ratio has
    # neither, so the body never refers to a table that is not there
    table = ratios_table(list(config["frameworks"]), ratios)
    lead = r"Table~\ref{tab:ratios} lists the same ratios with their intervals." + "\n"
    atomic_write_text(outputs["ratios"], lead + table if table else "% no ratio to PyTorch in this study\n")
    atomic_write_text(outputs["environment"], environment_table(env))
    loader_result = read_json(loader)
    extra = loader_macros(loader_result, frame)
    extra["fwbWrittenAt"] = written_up_at(written_at, env.get("fwbench commit"))
    include = include_deviating(dict(config))
    epochs = None
    if training:
        epochs, agreement = read_tidy(training[0]), read_tidy(training[1])
        extra |= training_macros(epochs, agreement, include)
        published = read_published(training_reference) if training_reference is not None else None
        section = training_section(epochs, agreement, include, published)
    else:
        section = training_section(None, None)
    body, detail = split_detail(section, "Training in full", "app:training")
    atomic_write_text(outputs["training"], body)
    atomic_write_text(outputs["training_detail"], detail)
    # Deviations and failures of every suite (the training table has one row per epoch, a failed cell one row).
    failures = failure_summary(frame, epochs)
    atomic_write_text(outputs["failures"], failures_table(frame, epochs, summary=failures))
    extra |= failure_macros(frame, epochs) | {"fwbFailureSummary": failures, "fwbModesSentence": modes_sentence(frame)}
    # the Results' inference findings, after Table ratios
    atomic_write_text(outputs["inference_results"], inference_results_section(frame, ratios, gains, config))
    atomic_write_text(outputs["macros"], macros(frame, ratios, env, dict(config), extra))
    atomic_write_text(outputs["dataset"], dataset_table(read_json(manifest), read_json(preprocess)))
    atomic_write_text(outputs["loader"], loader_table(loader_result, frame))
    starts = {record["model"]: record["description"] for record in map(read_json, weights)}
    rows = [row for path in facts for row in read_json(path)]
    atomic_write_text(outputs["models"], models_table(rows, starts))
