"""The fairness ledger's checks of what every framework was given: the same weights (and logits that agree with
PyTorch's), the same input bytes and order, the same numerical precision, the same threads, and a NumPy baseline on
its CPU's own BLAS kernels.

Each row cites what the cells recorded (digests, settings, thread counts, the BLAS environment) or what the study's
parity rule measured, never the configuration's intent; a digest a cell from before fwbench did not record makes the
row "not measured", with where.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import join_words, label, ordered_frameworks
from fwbench.analysis.common.partners import tf32_scope_of
from fwbench.analysis.fairness.rows import (
    HELD,
    NOT_HELD,
    NOT_MEASURED,
    cell_name,
    group_key,
    in_suite,
    named,
    row,
    settings_of,
    succeeded,
    variant_of,
)
from fwbench.installation import FRAMEWORK_DISTRIBUTIONS, normalise, untested_framework_versions
from fwbench.models.calibration import MIN_INPUT_DEPENDENCE
from fwbench.scenarios.parity import REFERENCE_FACTOR
from fwbench.trackers.hardware import recorded_core_type


def _parity_failure(r) -> str:
    """Why one model's parity row did not hold, in the ledger's words."""
    if isinstance(r.missing, str):
        return r.missing
    if "can_fail" in r._fields and not bool(r.can_fail):
        dependence = getattr(r, "input_dependence", float("nan"))
        return (
            f"logits do not depend on the image (spread {dependence:.1e} of their scale): the check cannot fail"
            if dependence < MIN_INPUT_DEPENDENCE
            else f"a permuted batch agrees within the bound ({r.permuted_error:.1e}): the check cannot fail"
        )
    if "same_inputs" in r._fields and not bool(r.same_inputs):
        return "fed other input bytes"
    bound = f" (bound {r.tolerance:.2e})" if "tolerance" in r._fields and r.tolerance == r.tolerance else ""
    return f"{r.relative_error:.2e}" + (f" in {r.precision}" if "precision" in r._fields else "") + bound


def weights_row(results: list[dict[str, Any]], parity: pd.DataFrame) -> dict[str, str]:
    """One weights file per model in every framework's cells, and the study's logits agreeing with PyTorch's in
    every precision, where the check could fail (`fwbench.scenarios.parity`: logits that vary with the image, a
    permuted batch beyond the bound); a model whose logits do not depend on the image does not hold."""
    control = "Same weights in every framework"
    files: dict[str, set[str]] = defaultdict(set)
    for r in results:
        if r["cell"]["suite"] in ("inference", "training") and r.get("inputs", {}).get("weights_sha256"):
            files[r["cell"]["model"]].add(r["inputs"]["weights_sha256"])
    split = sorted(m for m, digests in files.items() if len(digests) > 1)
    if parity.empty:
        return row(control, NOT_MEASURED, "no framework's logits were compared with PyTorch's (no PyTorch cells)")
    measured_rows = parity.dropna(subset=["relative_error"])
    parts = []
    for framework in ordered_frameworks(parity["framework"]):
        mine = measured_rows[measured_rows["framework"] == framework]
        if len(mine):
            worst = mine.loc[mine["relative_error"].idxmax()]
            parts.append(f"{label(framework)} {worst['relative_error']:.1e} ({worst['model']})")
    first = parity.iloc[0]
    kinds = parity["arithmetic"] if "arithmetic" in parity else pd.Series("fp32", index=parity.index)
    bounds = ", ".join(f"{kind} {bound:.0e}" for kind, bound in parity.groupby(kinds)["tolerance"].min().items())
    scaled = parity[(kinds == "fp32") & parity["reference_error"].notna()] if "reference_error" in parity else []
    if len(scaled):
        widest = scaled.loc[scaled["tolerance"].idxmax()]
        bounds += (
            f"; in fp32 at least {REFERENCE_FACTOR} times PyTorch's own float32 error against its float64 logits, "
            f"up to {widest['tolerance']:.1e} ({widest['model']})"
        )
    measured = (
        f"worst relative eval-logit error against PyTorch on {int(first['images'])} validation images at "
        f"{int(first['image_size'])} px: {join_words(parts) if parts else 'none measured'} "
        f"(bound {bounds}); one weights file per model in all cells"
        if not split
        else ""
    )
    if "input_dependence" in parity and parity["input_dependence"].notna().any():
        least = parity.loc[parity["input_dependence"].idxmin()]
        measured += (
            f"; logits vary with the image by at least {least['input_dependence']:.1e} of their scale "
            f"({least['model']}), a permuted batch differs by at least {parity['permuted_error'].min():.1e}"
        )
    failing = parity[~parity["holds"].astype(bool)]
    where = [f"{r.model} in {label(r.framework)}: {_parity_failure(r)}" for r in failing.itertuples()]
    where += [f"{model}: {len(files[model])} different weights files among its cells" for model in split]
    if split:
        measured = "the cells of a model read different weights files"
    return row(control, NOT_HELD if where else HELD, measured, "; ".join(where))


def inputs_row(results: list[dict[str, Any]], parity_inputs_equal: bool | None) -> dict[str, str]:
    """The same dataset (manifest digest), the same input batch bytes per comparison (inference), the same epoch
    orders (training): digests compared across the frameworks of every comparison group."""
    control = "Same input bytes and order"
    manifests = {r["inputs"].get("dataset_manifest_sha256") for r in results if r["cell"]["suite"] != "micro"}
    manifests.discard(None)
    fields = {"inference": "input_sha256", "training": "loader_order_sha256", "micro": None}
    unrecorded, differing, compared = [], [], Counter()
    groups: dict[tuple, dict[str, str]] = defaultdict(dict)
    for r in succeeded(results):
        suite = r["cell"]["suite"]
        metrics = r["metrics"]
        value = metrics.get(fields[suite]) if fields[suite] else (metrics.get("operation") or {}).get("input_sha256")
        if value is None:
            unrecorded.append(cell_name(r))
            continue
        groups[group_key(r)][variant_of(r)] = value
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
        where.append("inputs differ in " + named(differing))
    if parity_inputs_equal is False:
        where.append("the parity rule's inputs differ between frameworks")
    if where:
        status = NOT_HELD
    elif unrecorded:
        status = NOT_MEASURED
        where.append(f"no digest recorded in {named(unrecorded)} (cells from before fwbench recorded it)")
    else:
        status = HELD
    return row(control, status, "; ".join(measured), "; ".join(where))


def precision_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """Per precision, each framework's dtype and whether TF32 was in effect: equal across frameworks."""
    control = "Same numerical precision"
    policy: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in succeeded(results):
        settings = settings_of(r)
        if r["cell"]["framework"] == "numpy":
            continue
        scope = tf32_scope_of(settings)
        tf32 = "TF32 off" if scope == "none" else f"TF32 in {scope}"
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
        return row(control, NOT_MEASURED, "no successful cell")
    return row(control, NOT_HELD if where else HELD, "; ".join(measured), "; ".join(where))


def threads_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """The threads each framework computed with (the effective count after pinning, and TensorFlow's two pools):
    one value across all cells of a comparison."""
    control = "Same threads"
    per_framework: dict[str, set[str]] = defaultdict(set)
    clamped = []
    for r in succeeded(results):
        fw = r["provenance"]["framework"]
        threads = fw.get("threads", {})
        settings = fw.get("settings", {})
        value = str(threads.get("effective"))
        if "inter_op_threads" in settings and r["cell"]["framework"] == "tensorflow":
            value += f" (intra {settings.get('intra_op_threads')}, inter {settings.get('inter_op_threads')})"
        per_framework[r["cell"]["framework"]].add(value)
        if threads.get("clamped"):
            clamped.append(cell_name(r))
    if not per_framework:
        return row(control, NOT_MEASURED, "no successful cell")
    measured = "; ".join(f"{label(f)} {', '.join(sorted(per_framework[f]))}" for f in ordered_frameworks(per_framework))
    counts = {v.split(" ")[0] for vs in per_framework.values() for v in vs}
    where = []
    if len(counts) > 1:
        where.append(f"thread counts differ: {measured}")
    if clamped:
        where.append("fewer threads than requested in " + named(clamped))
    return row(control, NOT_HELD if where else HELD, measured, "; ".join(where))


def _blas_kernels(result: dict[str, Any]) -> set[str]:
    """The kernels NumPy's BLAS ran in a cell: its own process's record (settings' `process_blas`), else the
    host's (provenance `blas`); empty where neither was recorded."""
    libraries = (settings_of(result).get("process_blas") or {}).get("libraries") or []
    chosen = {
        str(pool["architecture"]) for pool in libraries if pool.get("user_api") == "blas" and pool.get("architecture")
    }
    host = (result["provenance"].get("blas") or {}).get("architecture")
    return chosen or ({str(host)} if host else set())


def _forced_against_cpu(cells: list[dict[str, Any]]) -> str:
    """How the forced core type compares with the CPU's instruction set, where the cells recorded both (", below
    this CPU's AVX-512 (BF16)"), else nothing."""
    for r in cells:
        versus = (r["provenance"].get("blas") or {}).get("forced_vs_cpu")
        isa = (r["provenance"].get("hardware") or {}).get("isa_level")
        if versus in ("below", "above") and isa:
            return f"; the forced kernels are {versus} this CPU's {isa}"
        if versus == "same" and isa:
            return f"; the forced kernels are at this CPU's level ({isa})"
    return ""


def _l2_size(cells: list[dict[str, Any]]) -> str:
    """The OPENBLAS_L2_SIZE the cells ran with (OpenBLAS told its cache size), as ", OPENBLAS_L2_SIZE=…"; nothing
    where unset."""
    sizes = {(r["provenance"].get("env") or {}).get("OPENBLAS_L2_SIZE") for r in cells} - {None}
    return "".join(f", OPENBLAS_L2_SIZE={size}" for size in sorted(sizes))


def blas_core_row(results: list[dict[str, Any]]) -> dict[str, str] | None:
    """The micro suite's NumPy baseline on the BLAS kernels OpenBLAS picks for its CPU, not on a core type forced
    by OPENBLAS_CORETYPE: a forced core type slows current NumPy, and so inflates every speedup over it. The
    machines this study runs on set it (and OPENBLAS_L2_SIZE); the study records it and never changes it, so the
    row says what the baseline ran under. None (no row) in a study without NumPy cells."""
    control = "NumPy baseline on its CPU's own BLAS kernels"
    cells = [r for r in succeeded(in_suite(results, "micro")) if r["cell"]["framework"] == "numpy"]
    if not cells:
        return None
    forced: dict[str, list[dict[str, Any]]] = defaultdict(list)
    unrecorded = []
    for r in cells:
        value, recorded = recorded_core_type(r["provenance"])
        if not recorded:
            unrecorded.append(cell_name(r))
        elif value:
            forced[value].append(r)
    kernels = sorted(set().union(*(_blas_kernels(r) for r in cells)))
    ran = f"; OpenBLAS ran its {' / '.join(kernels)} kernels" if kernels else ""
    if forced:
        under = [r for rs in forced.values() for r in rs]
        values = "; ".join(
            f"OPENBLAS_CORETYPE={v} in {len(rs)} of {len(cells)} NumPy cells" for v, rs in forced.items()
        )
        measured = f"{values}{_l2_size(under)}{ran}; set by the machine, recorded and not changed"
        where = "a forced BLAS core type slows current NumPy, so the speedups over NumPy may be overstated"
        where += _forced_against_cpu(under)
        if len(under) < len(cells):
            where += f"; forced in {named([cell_name(r) for r in under])}"
        return row(control, NOT_HELD, measured, where)
    if len(unrecorded) == len(cells):
        return row(control, NOT_MEASURED, "no NumPy cell recorded its environment")
    measured = f"OPENBLAS_CORETYPE unset in {len(cells) - len(unrecorded)} of {len(cells)} NumPy cells{ran}"
    if unrecorded:
        return row(control, NOT_MEASURED, measured, f"no environment recorded in {named(unrecorded)}")
    return row(control, HELD, measured)


def versions_row(results: list[dict[str, Any]]) -> dict[str, str]:
    """The frameworks' versions as the cells recorded them, against the tested set (pyproject.toml's `tested`
    extra): fwbench runs in environments it did not make, and a version it was not tested with is named here and in
    the setup table (with the tested one), not hidden. Short, the differing versions in the wide column: the ledger
    is one float, and a four-line row pushed a study's ledger 2.6 pt off its page."""
    control = "Framework versions as tested"
    found: set[str] = set()
    untested: set[str] = set()
    for r in succeeded(results):
        recorded = r["provenance"]["framework"].get("versions") or {}
        versions = {k: v for k, v in recorded.items() if v and normalise(k) in FRAMEWORK_DISTRIBUTIONS}
        found |= set(versions)
        untested |= {f"{name} {versions[name]}" for name in untested_framework_versions(versions)}
    if not found:
        return row(control, NOT_MEASURED, "no successful cell recorded a framework version")
    if not untested:
        return row(control, HELD, f"{len(found)} of {len(found)} framework packages at their tested version")
    return row(control, NOT_HELD, ", ".join(sorted(untested)), "not the tested versions (the setup table gives them)")
