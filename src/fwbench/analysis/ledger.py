"""The fairness ledger: every control the study claims, with the value this study measured for it and whether it
held, read from the cells' own records (never from the configuration's intent).

A reader of a framework comparison needs to know which of its fairness claims were checked in this run, not in a
test suite somewhere else: so each row cites what the cells recorded (digests, settings, thread counts, compile
times, flags) or what the study's parity rule measured, and says "held", "did not hold" with where, or "not
measured" with why (a CPU has no NVML to list other processes, a cell from before fwbench recorded a digest).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

import pandas as pd

from fwbench.analysis.latex import escape, join_words, label, ordered_frameworks
from fwbench.analysis.partners import PlacementCheck, check_placement, node_of

HELD = "held"
NOT_HELD = "did not hold"
NOT_MEASURED = "not measured"
COLUMNS = ["control", "status", "measured", "where"]
WHERE_LIMIT = 4  # cells named in a row before "and N more"


def _cell_name(result: dict[str, Any]) -> str:
    c = result["cell"]
    return f"{c['suite']} {c['framework']} {c['model']} {c['precision']} bs{c['batch_size']}"


def _named(names: list[str]) -> str:
    names = sorted(names)
    shown = ", ".join(names[:WHERE_LIMIT])
    return shown + (f" and {len(names) - WHERE_LIMIT} more" if len(names) > WHERE_LIMIT else "")


def _row(control: str, status: str, measured: str, where: str = "") -> dict[str, str]:
    return {"control": control, "status": status, "measured": measured, "where": where}


def _ok(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r.get("status") == "ok"]


def _suite(results: list[dict[str, Any]], suite: str) -> list[dict[str, Any]]:
    return [r for r in results if r["cell"]["suite"] == suite]


def _group_key(result: dict[str, Any]) -> tuple:
    c = result["cell"]
    return (c["suite"], c["model"], c["precision"], c["batch_size"])


def weights_row(results: list[dict[str, Any]], parity: pd.DataFrame) -> dict[str, str]:
    """One weights file per model in every framework's cells, and the study's logits agreeing with PyTorch's."""
    control = "Same weights in every framework"
    files: dict[str, set[str]] = defaultdict(set)
    for r in results:
        if r["cell"]["suite"] in ("inference", "training") and r.get("inputs", {}).get("weights_sha256"):
            files[r["cell"]["model"]].add(r["inputs"]["weights_sha256"])
    split = sorted(m for m, digests in files.items() if len(digests) > 1)
    if parity.empty:
        return _row(control, NOT_MEASURED, "no framework's logits were compared with PyTorch's (no PyTorch cells)")
    measured_rows = parity.dropna(subset=["relative_error"])
    parts = []
    for framework in ordered_frameworks(parity["framework"]):
        mine = measured_rows[measured_rows["framework"] == framework]
        if len(mine):
            worst = mine.loc[mine["relative_error"].idxmax()]
            parts.append(f"{label(framework)} {worst['relative_error']:.1e} ({worst['model']})")
    first = parity.iloc[0]
    measured = (
        f"worst relative eval-logit error against PyTorch on {int(first['images'])} validation images at "
        f"{int(first['image_size'])} px: {join_words(parts) if parts else 'none measured'} "
        f"(bound {first['tolerance']:.0e}); one weights file per model in all cells"
        if not split
        else ""
    )
    failing = parity[~parity["holds"].astype(bool)]
    where = [
        f"{r.model} in {label(r.framework)}: "
        + (r.missing if isinstance(r.missing, str) else f"{r.relative_error:.1e}")
        for r in failing.itertuples()
    ]
    where += [f"{model}: {len(files[model])} different weights files among its cells" for model in split]
    if split:
        measured = "the cells of a model read different weights files"
    return _row(control, NOT_HELD if where else HELD, measured, "; ".join(where))


def inputs_row(results: list[dict[str, Any]], parity_inputs_equal: bool | None) -> dict[str, str]:
    """The same dataset (manifest digest), the same input batch bytes per comparison (inference), the same epoch
    orders (training): digests compared across the frameworks of every comparison group."""
    control = "Same input bytes and order"
    manifests = {r["inputs"].get("dataset_manifest_sha256") for r in results if r["cell"]["suite"] != "micro"}
    manifests.discard(None)
    fields = {"inference": "input_sha256", "training": "loader_order_sha256", "micro": None}
    unrecorded, differing, compared = [], [], Counter()
    groups: dict[tuple, dict[str, str]] = defaultdict(dict)
    for r in _ok(results):
        suite = r["cell"]["suite"]
        metrics = r["metrics"]
        value = metrics.get(fields[suite]) if fields[suite] else (metrics.get("operation") or {}).get("input_sha256")
        if value is None:
            unrecorded.append(_cell_name(r))
            continue
        groups[_group_key(r)][r["cell"]["framework"]] = value
    for key, by_framework in groups.items():
        if len(by_framework) < 2:
            continue
        compared[key[0]] += 1
        if len(set(by_framework.values())) > 1:
            differing.append(f"{key[0]} {key[1]} {key[2]} bs{key[3]}")
    measured = [f"{len(manifests)} dataset manifest digest{'s' if len(manifests) != 1 else ''} across all cells"]
    what = {"inference": "input batches", "training": "epoch orders", "micro": "operand inputs"}
    measured += [
        f"{what[s]} equal in {n - sum(d.startswith(s) for d in differing)} of {n} groups"
        for s, n in sorted(compared.items())
    ]
    if parity_inputs_equal is not None:
        measured.append("parity inputs " + ("equal" if parity_inputs_equal else "differ"))
    where = []
    if len(manifests) > 1:
        where.append(f"{len(manifests)} different datasets")
    if differing:
        where.append("inputs differ in " + _named(differing))
    if parity_inputs_equal is False:
        where.append("the parity rule's inputs differ between frameworks")
    if where:
        status = NOT_HELD
    elif unrecorded:
        status = NOT_MEASURED
        where.append(f"no digest recorded in {_named(unrecorded)} (cells from before fwbench recorded it)")
    else:
        status = HELD
    return _row(control, status, "; ".join(measured), "; ".join(where))


def _settings(result: dict[str, Any]) -> dict[str, Any]:
    return result["provenance"]["framework"].get("settings", {})


def precision_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Per precision, each framework's dtype and whether TF32 was in effect: equal across frameworks."""
    control = "Same numerical precision"
    policy: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in _ok(results):
        settings = _settings(r)
        if r["cell"]["framework"] == "numpy":
            continue
        tf32 = "TF32 on" if settings.get("tf32_in_effect") else "TF32 off"
        policy[r["cell"]["precision"]][r["cell"]["framework"]].add(f"{settings.get('dtype')}, {tf32}")
    measured, where = [], []
    for precision, by_framework in sorted(policy.items()):
        values = {v for vs in by_framework.values() for v in vs}
        if len(values) == 1:
            measured.append(
                f"{precision}: {values.pop()} in {join_words([label(f) for f in ordered_frameworks(by_framework)])}"
            )
        else:
            detail = "; ".join(f"{label(f)} {' / '.join(sorted(v))}" for f, v in by_framework.items())
            measured.append(f"{precision}: {detail}")
            where.append(f"{precision} cells differ ({detail})")
    if not measured:
        return _row(control, NOT_MEASURED, "no successful cell")
    return _row(control, NOT_HELD if where else HELD, "; ".join(measured), "; ".join(where))


def threads_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """The threads each framework computed with (the effective count after pinning, and TensorFlow's two pools):
    one value across all cells of a comparison."""
    control = "Same threads"
    per_framework: dict[str, set[str]] = defaultdict(set)
    clamped = []
    for r in _ok(results):
        fw = r["provenance"]["framework"]
        threads = fw.get("threads", {})
        settings = fw.get("settings", {})
        value = str(threads.get("effective"))
        if "inter_op_threads" in settings and r["cell"]["framework"] == "tensorflow":
            value += f" (intra {settings.get('intra_op_threads')}, inter {settings.get('inter_op_threads')})"
        per_framework[r["cell"]["framework"]].add(value)
        if threads.get("clamped"):
            clamped.append(_cell_name(r))
    if not per_framework:
        return _row(control, NOT_MEASURED, "no successful cell")
    measured = "; ".join(f"{label(f)} {', '.join(sorted(per_framework[f]))}" for f in ordered_frameworks(per_framework))
    counts = {v.split(" ")[0] for vs in per_framework.values() for v in vs}
    where = []
    if len(counts) > 1:
        where.append(f"thread counts differ: {measured}")
    if clamped:
        where.append("fewer threads than requested in " + _named(clamped))
    return _row(control, NOT_HELD if where else HELD, measured, "; ".join(where))


def compile_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Compilation and first calls kept outside the timed loops: how much time that was per framework."""
    control = "Compile time apart from steady state"
    seconds: Counter = Counter()
    eager = set()
    for r in _ok(results):
        metrics, framework = r["metrics"], r["cell"]["framework"]
        trials = metrics.get("trials") or [metrics]
        for t in trials:
            seconds[framework] += float(t.get("compile_s") or 0.0) + float(t.get("first_call_s") or 0.0)
        if r["cell"]["suite"] == "training":
            seconds[framework] += float(metrics.get("compile_wall_s") or 0.0)
        if metrics.get("compile_s") is None and r["cell"]["suite"] == "inference":
            eager.add(framework)
    if not seconds:
        return _row(control, NOT_MEASURED, "no successful cell")
    parts = [
        f"{label(f)} {seconds[f]:.1f} s" + (" (eager: first calls)" if f in eager else "")
        for f in ordered_frameworks(seconds)
    ]
    return _row(control, HELD, "compile and first calls outside every timed loop: " + ", ".join(parts))


def _pairs(results: list[dict[str, Any]], host_baseline: bool) -> dict[str, PlacementCheck]:
    """Where the cells of each comparison ran ("inference resnet50 fp32 bs1" -> `check_placement` of its
    successful cells, one per framework), for every comparison of two or more frameworks: an inference or micro
    group, or the training cells of one model, precision and batch size. `host_baseline`: keep the micro suite's
    NumPy cells (they run on the host's CPU by design, so they count for the node but not the device model)."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in _ok(results):
        if host_baseline or r["cell"]["framework"] != "numpy":
            groups[_group_key(r)].append(r)
    return {"{} {} {} bs{}".format(*key): check_placement(cells) for key, cells in groups.items() if len(cells) > 1}


def device_row(results: list[dict[str, Any]], inference: pd.DataFrame) -> dict[str, str]:
    """One device model for every framework of each comparison, and (on GPUs) the comparable settings equal within
    each comparison. A study may use several device models (on a cluster, one per node), so what must hold is that
    every framework ran on the same ones and the two cells of every ratio on one model (`check_placement`: the GPU
    model on a GPU, the CPU model on a CPU)."""
    control = "Same device and settings"
    devices: dict[str, set[str]] = defaultdict(set)
    for r in _ok(results):
        if r["cell"]["framework"] == "numpy":  # the micro suite's host baseline runs on the CPU by design
            continue
        device = r["provenance"]["framework"].get("device", {})
        devices[r["cell"]["framework"]].add(str(device.get("name") or device.get("platform")))
    if not devices:
        return _row(control, NOT_MEASURED, "no successful cell")
    distinct = {d for ds in devices.values() for d in ds}
    differing = []
    if "settings_differ" in inference:
        flagged = inference[inference["settings_differ"].astype(str) == "True"]
        differing = [f"{r.framework} {r.model} bs{r.batch_size}" for r in flagged.itertuples()]
    pairs = _pairs(results, host_baseline=False)
    split = [f"{name} ({check.model_values()})" for name, check in pairs.items() if check.models_differ]
    measured = f"{', '.join(sorted(distinct))} for {join_words([label(f) for f in ordered_frameworks(devices)])}"
    if pairs:
        measured += f"; one device model in {len(pairs) - len(split)} of {len(pairs)} comparison pairs"
    where = []
    if split:
        where.append("device models differ within " + _named(split))
    elif len({frozenset(d) for d in devices.values()}) > 1:  # the frameworks' devices differ outside any pair
        where.append(
            "frameworks ran on different devices: "
            + "; ".join(f"{label(f)} {', '.join(sorted(d))}" for f, d in devices.items())
        )
    if differing:
        where.append("GPU settings differ from the partner cell in " + _named(differing))
    return _row(control, NOT_HELD if where else HELD, measured, "; ".join(where))


def node_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """The cells of each comparison on one node (on a cluster a SLURM job may land anywhere): a ratio across nodes
    of one device model is kept, but two boards of one model still differ (clocks, cooling, the node's CPU)."""
    control = "Same node for each pair"
    nodes = {node_of(r) for r in _ok(results)} - {None}
    if not nodes:
        return _row(control, NOT_MEASURED, "no cell recorded its node (cells from before fwbench recorded it)")
    if len(nodes) == 1:
        return _row(control, HELD, f"every cell ran on 1 node ({nodes.pop()})")
    pairs = _pairs(results, host_baseline=True)
    split = [f"{name} ({check.node_values()})" for name, check in pairs.items() if check.nodes_differ]
    measured = f"{len(nodes)} nodes; {len(pairs) - len(split)} of {len(pairs)} comparison pairs each on one node"
    return _row(control, NOT_HELD if split else HELD, measured, "nodes differ within " + _named(split) if split else "")


def order_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Interleaved trials whose order rotates: each framework of a comparison group took each position alike."""
    control = "Interleaved, rotating trial order"
    groups: dict[tuple, dict[str, list[int]]] = defaultdict(dict)
    for r in _ok(_suite(results, "inference")):
        trials = r["metrics"].get("trials") or []
        groups[_group_key(r)][r["cell"]["framework"]] = [t.get("order") for t in trials]
    if not groups:
        return _row(control, NOT_MEASURED, "no inference cells")
    single = [k for k, v in groups.items() if all(len(orders) < 2 for orders in v.values())]
    if len(single) == len(groups):
        return _row(control, NOT_MEASURED, "one trial per cell: nothing to interleave", "every inference group")
    unbalanced = []
    for key, by_framework in groups.items():
        if key in single or len(by_framework) < 2:
            continue
        positions = [Counter(orders) for orders in by_framework.values()]
        rounds = min(len(o) for o in by_framework.values())
        if rounds >= len(by_framework):
            spread = [max(p.values()) - min(p.get(i, 0) for i in range(1, len(by_framework) + 1)) for p in positions]
            if max(spread) > 1:
                unbalanced.append(f"{key[1]} bs{key[3]}")
    measured = f"{len(groups) - len(single)} inference groups in interleaved rounds"
    where = ("positions unbalanced in " + _named(unbalanced)) if unbalanced else ""
    if single:
        where = "; ".join(filter(None, [where, f"one trial in {len(single)} groups"]))
    return _row(control, NOT_HELD if where else HELD, measured, where)


def flag_row(control: str, results: list[dict[str, Any]], flag: str, what: str) -> dict[str, str]:
    """A per-cell flag that must be off everywhere (noisy, CI not reached, recompiled)."""
    ok = [r for r in _ok(results) if r["cell"]["suite"] in ("inference", "micro")]
    flagged = [_cell_name(r) for r in ok if (r["metrics"].get("flags") or {}).get(flag)]
    measured = f"{len(flagged)} of {len(ok)} cells {what}"
    return _row(control, NOT_HELD if flagged else HELD, measured, _named(flagged))


def isolation_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """No other process on the GPU when a cell started (NVML); on a CPU there is no such list to read."""
    control = "Device to itself"
    checked = [r for r in _ok(results) if r["metrics"].get("isolation")]
    if not checked:
        reasons = {(r["metrics"].get("missing") or {}).get("isolation") for r in _ok(results)} - {None}
        reason = sorted(reasons)[0] if reasons else "no cell recorded it"
        return _row(control, NOT_MEASURED, f"cells ran one at a time; other processes not listed: {reason}")
    flagged = [_cell_name(r) for r in checked if (r["metrics"].get("flags") or {}).get("other_gpu_processes")]
    measured = f"{len(checked)} cells checked with NVML; {len(flagged)} found other processes"
    return _row(control, NOT_HELD if flagged else HELD, measured, _named(flagged))


def deviations_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Cells that ran with a workaround of the fallback ladder (a difference the paper must show)."""
    control = "No workarounds"
    deviating = [
        f"{_cell_name(r)} ({', '.join(d.get('name', '?') for d in r['deviations'])})"
        for r in results
        if r.get("deviations")
    ]
    measured = f"{len(deviating)} of {len(results)} cells ran with a workaround"
    return _row(control, NOT_HELD if deviating else HELD, measured, _named(deviating))


def failures_row(results: list[dict[str, Any]]) -> dict[str, str]:
    control = "Every cell measured"
    failed = [r for r in results if r.get("status") != "ok"]
    kinds = Counter((r.get("failure") or {}).get("kind", "unknown") for r in failed)
    measured = f"{len(results) - len(failed)} of {len(results)} cells succeeded"
    where = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
    if failed:
        where += ": " + _named([_cell_name(r) for r in failed])
    return _row(control, NOT_HELD if failed else HELD, measured, where)


def ledger(results: Iterable[dict[str, Any]], parity: pd.DataFrame, inference: pd.DataFrame) -> pd.DataFrame:
    """Every row of the ledger (COLUMNS), in the order the paper prints them."""
    results = list(results)
    parity_inputs = bool(parity["same_inputs"].astype(bool).all()) if len(parity) else None
    rows = [
        weights_row(results, parity),
        inputs_row(results, parity_inputs),
        precision_row(results),
        threads_row(results),
        compile_row(results),
        device_row(results, inference),
        node_row(results),
        order_row(results),
        deviations_row(results),
        flag_row("Not noisy (IQR at most 10% of the median)", results, "noisy", "noisy"),
        flag_row("CI target reached", results, "ci_not_reached", "stopped before their CI target"),
        flag_row("No recompilation while timed", results, "recompiled", "recompiled inside the timed loop"),
        isolation_row(results),
        failures_row(results),
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def ledger_table(rows: pd.DataFrame) -> str:
    """The ledger as a full-width LaTeX table: control, status, what was measured and where it did not hold."""
    lines = [
        r"\begin{table*}[t]",
        r"\centering",
        r"\caption{Fairness ledger: every control of the comparison with what this study measured for it, from the "
        r"cells' own records and the study's parity rule. ``Did not hold'' names where; ``not measured'' says why.}",
        r"\label{tab:ledger}",
        r"\footnotesize",
        # Ragged right: cell names and digests do not justify well in narrow columns.
        r"\begin{tabular}{@{}"
        + "".join(rf">{{\raggedright\arraybackslash}}p{{{width}\textwidth}}" for width in (0.16, 0.08, 0.37, 0.28))
        + "@{}}",
        r"\toprule",
        r"Control & Status & Measured in this study & Where it did not hold, or why not measured \\",
        r"\midrule",
    ]
    for row in rows.itertuples():
        status = r"\textbf{" + escape(row.status) + "}" if row.status == NOT_HELD else escape(row.status)
        lines.append(f"{escape(row.control)} & {status} & {escape(row.measured)} & {escape(row.where or '')} \\\\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def ledger_sentence(rows: pd.DataFrame) -> str:
    """The section's lead: how many controls held, which did not, which could not be measured."""
    counts = Counter(rows["status"])
    not_held = rows[rows["status"] == NOT_HELD]["control"].tolist()
    missing = rows[rows["status"] == NOT_MEASURED]["control"].tolist()
    text = f"Of the {len(rows)} controls in Table~\\ref{{tab:ledger}}, {counts[HELD]} held in this study"
    if not_held:
        text += f"; {len(not_held)} did not: {_in_sentence(not_held)}"
    if missing:
        text += f"; {len(missing)} could not be measured here: {_in_sentence(missing)}"
    return text + "."


def _in_sentence(controls: list[str]) -> str:
    """Control names inside a sentence, escaped (a name may hold "%", which would end the line in LaTeX), each with
    its first letter lowered unless it begins an abbreviation ("CI target reached" stays)."""
    return join_words(
        [escape(c[:1].lower() + c[1:] if c[1:2].islower() else c) for c in controls],
    )


def ledger_section(rows: pd.DataFrame) -> str:
    return "\n\n".join(
        [
            r"\section{Fairness ledger}",
            r"\label{sec:ledger}",
            "Each claim of fairness is checked in the study itself, from what every cell recorded and from a rule "
            "that runs every model's study weights in every framework on the same validation images and compares "
            "the logits with PyTorch's. " + ledger_sentence(rows),
            ledger_table(rows),
        ]
    )
