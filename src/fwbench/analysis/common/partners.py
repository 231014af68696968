"""Partner check: a GPU cell is compared with the same cell in every other framework, and flagged where the two
ran under different comparable settings (another GPU model, TF32 in one only, another dtype, another CUDA major
version). A ratio between such cells would measure the settings, not the frameworks, so the table marks them.
Partners that ran with different workarounds from the fallback ladder are flagged apart (`deviation_differs`), and
where partners ran (device model, node: `check_placement`) decides whether their ratio is refused or marked."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fwbench.analysis.common.latex import ordered_variants, variant_label
from fwbench.study import modes as execution_modes

# Columns of the tidy table that must match between partners on a GPU; framework-specific knobs (cuDNN benchmark
# mode, XLA_FLAGS) are recorded and printed in the setup table but are not comparable one to one.
COMPARED = {"device": "GPU", "tf32_scope": "TF32", "dtype": "dtype", "cuda_major": "CUDA major"}


def tf32_scope_of(settings: dict[str, Any]) -> str:
    """Where TF32 computed a cell's float32 inputs ("none", "convolutions", "matmuls", "matmuls and convolutions";
    fwbench.backends.base.tf32_scope). A cell from before the scope was recorded had TF32 in effect only at precision
    tf32, which switches it on for both."""
    scope = settings.get("tf32_scope")
    if scope:
        return str(scope)
    return "matmuls and convolutions" if settings.get("tf32_in_effect") else "none"


PARTNER_KEYS = ["suite", "model", "precision", "batch_size"]


# Execution modes (fwbench.study.modes): torch eager and torch compile are two cells of one comparison, so whatever
# pairs or names partners keys them by (framework, mode). A result or table from before cells had a mode ran in its
# framework's primary one.


def cell_mode(cell: Any) -> str:
    """The execution mode of a cell dict (a result's `cell`) or a tidy row; the framework's primary mode where it is
    not recorded (None, NaN, "")."""
    mode = cell.get("mode") if hasattr(cell, "get") else None
    if mode is None or (not isinstance(mode, str) and pd.isna(mode)) or str(mode) == "":
        framework = str(cell["framework"])
        return execution_modes.primary(framework) if framework in execution_modes.MODES else ""
    return str(mode)


def with_modes(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with every row's `mode` (a table written before cells had a mode gets its frameworks' primary one)
    and `compiled` (whether that mode runs a compiled program)."""
    if frame.empty:
        return frame.assign(mode=pd.Series(dtype=object), compiled=pd.Series(dtype=bool))
    # the two columns as plain dicts: a Series per row (iterrows) was a third of the published comparison's time
    modes = [cell_mode(row) for row in frame[[c for c in ("mode", "framework") if c in frame]].to_dict("records")]
    return frame.assign(mode=modes, compiled=[execution_modes.is_compiled(m) for m in modes])


def variant_key(framework: str, mode: str | None) -> str:
    """A variant in a detail string: the framework alone in its primary mode ("torch", "jax"), with the mode
    otherwise ("torch compile"), so messages about studies with one mode per framework read as they always did."""
    if not mode or framework not in execution_modes.MODES or mode == execution_modes.primary(framework):
        return framework
    return f"{framework} {mode}"


def mixed_modes(mode_a: str, mode_b: str) -> bool:
    """Whether exactly one of two modes runs a compiled program: a ratio between them measures a compiler too."""
    return execution_modes.is_compiled(mode_a) != execution_modes.is_compiled(mode_b)


def multi_mode(variants: Iterable[tuple[str, str]]) -> set[str]:
    """The frameworks with more than one mode among these (framework, mode) pairs: only their labels need the mode
    (`latex.variant_label(..., alone=...)`)."""
    seen: dict[str, set[str]] = {}
    for framework, mode in variants:
        seen.setdefault(str(framework), set()).add(str(mode))
    return {framework for framework, found in seen.items() if len(found) > 1}


def variant_names(
    variants: Iterable[tuple[str, str]], context: Iterable[tuple[str, str]] = ()
) -> dict[tuple[str, str], str]:
    """(framework, mode) -> its name in a table or sentence, in the paper's order: the framework alone where it has
    one mode among `variants` and `context` ("JAX/Flax"), with the mode where it has several ("PyTorch (eager)",
    "PyTorch (compiled)"). `context`: variants that count without being named (the baseline a table compares with)."""
    variants = ordered_variants(variants)
    several = multi_mode([*variants, *context])
    return {v: variant_label(v[0], v[1], alone=v[0] not in several) for v in variants}


def ratio_variant(framework: str, present: Iterable[str], config: Any = None) -> tuple[str | None, bool]:
    """(mode, fell back) of `framework` for a ratio between frameworks, given the modes it has cells in: the
    configured ratio mode (`fwbench.study.modes.ratio_mode`, compiled by default) when present, else its first
    configured mode present (the primary one), else whichever it has; (None, False) without a cell."""
    present = list(dict.fromkeys(present))
    if not present:
        return None, False
    if framework not in execution_modes.MODES:  # a framework the registry does not know has no ratio mode
        return present[0], False
    wanted = execution_modes.ratio_mode(config or {}, framework)
    if wanted in present:
        return wanted, False
    order = execution_modes.framework_modes(config or {}, framework) + list(execution_modes.MODES.get(framework, ()))
    for mode in order:
        if mode in present:
            return mode, True
    return present[0], True


def flag_partners(frame: pd.DataFrame) -> pd.DataFrame:
    """Add `settings_differ` (bool) and `settings_differ_detail` (what differs, e.g. "TF32: torch True, jax
    False"; a mode besides the primary one is named, "torch compile") to every row; CPU cells and failed cells are
    never flagged."""
    frame = frame.copy()
    frame["settings_differ"] = False
    frame["settings_differ_detail"] = None
    on_gpu = (frame["status"] == "ok") & (frame["platform"] == "cuda")
    for _, group in frame[on_gpu].groupby(PARTNER_KEYS, sort=False):
        names = [variant_key(str(row["framework"]), cell_mode(row)) for _, row in group.iterrows()]
        if len(set(names)) < 2:
            continue
        details = []
        for column, label in COMPARED.items():
            values = group[column].set_axis(names)
            if values.astype(str).nunique() > 1:
                details.append(f"{label}: " + ", ".join(f"{f} {v}" for f, v in values.items()))
        if details:
            frame.loc[group.index, "settings_differ"] = True
            frame.loc[group.index, "settings_differ_detail"] = "; ".join(details)
    return frame


# Deviations: a cell that failed, matched a rung of the fallback ladder and was rerun with that workaround records it
# (`deviations` in the result). A ratio between partners that ran with different workarounds (one with, one without,
# or different ones) measures the workaround as well as the frameworks: `deviation_differs` marks it, beside (not
# merged with) `settings_differ`, and the summary statistics leave it out unless the config says otherwise.


def failure_columns(result: dict[str, Any]) -> dict[str, Any]:
    """The tidy columns describing how a cell failed or what it ran with: `failure_kind` (None when ok),
    `workarounds_tried` (rungs a failed cell tried, "+"-joined, None when none), `deviations` (the workarounds an ok
    cell ran with, "+"-joined, None when none), `deviation_detail` ("name: applied_because", "; "-joined) and
    `deviation_first_failure` (the kind of the failure that made each one apply, "+"-joined)."""
    failure = result.get("failure") or {}
    deviations = result.get("deviations") or []
    return {
        "failure_kind": failure.get("kind"),
        "workarounds_tried": "+".join(failure.get("workarounds_tried") or []) or None,
        "deviations": "+".join(d["name"] for d in deviations) or None,
        "deviation_detail": "; ".join(f"{d['name']}: {d['applied_because']}" for d in deviations) or None,
        "deviation_first_failure": "+".join(d["first_failure"]["kind"] for d in deviations) or None,
    }


def deviation_set(value: object) -> frozenset[str]:
    """The workaround names of a `deviations` value (a "+"-joined string, or None/NaN/"" for none), as a set: the
    order in which rungs applied does not change what a cell ran with."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return frozenset()
    return frozenset(name for name in str(value).split("+") if name)


def deviations_differ(*values: object) -> bool:
    """True when the cells' `deviations` values name different sets of workarounds."""
    return len({deviation_set(value) for value in values}) > 1


def flag_deviations(frame: pd.DataFrame, keys: list[str] | None = None) -> pd.DataFrame:
    """Add `deviation_differs` (bool) to every row: True for the successful cells of a partner group (the same cell
    in every framework, `keys`; several rows per cell, e.g. training epochs, are fine) whose frameworks ran with
    different workarounds. Failed cells have no ratio and are never flagged; a frame without the column (results
    from before the fallback ladder) is not flagged. The two modes of one framework (torch eager and compile) are
    partners too: the compiled-over-eager gain is a ratio."""
    keys = keys or PARTNER_KEYS
    frame = frame.copy()
    frame["deviation_differs"] = False
    if "deviations" not in frame:
        return frame
    ok = with_modes(frame[frame["status"] == "ok"])
    for _, group in ok.groupby(keys, sort=False):
        per_framework = group.groupby(["framework", "mode"], sort=False)["deviations"].first()
        if len(per_framework) > 1 and deviations_differ(*per_framework.tolist()):
            frame.loc[group.index, "deviation_differs"] = True
    return frame


# Placement: on a cluster the cells of one comparison may run on different nodes, even on different GPU models. A
# ratio across device models measures the devices, not the frameworks, so it is refused; a ratio across nodes of one
# model is kept but marked, since two boards of one model still differ (clocks, cooling, the node's CPU and memory).


def _known(value: object) -> str | None:
    """A recorded value as text, or None for an unknown one (None, NaN, "": a result or a CSV round trip without it)."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    text = str(value).strip()
    return text or None


def node_of(result: dict[str, Any]) -> str | None:
    """The node a cell ran on: `placement.node` (SLURMD_NODENAME under SLURM, else the hostname); results from before
    it was recorded have only `placement.host`, which is the same machine; None without a placement."""
    placement = result["provenance"].get("placement") or {}
    return _known(placement.get("node")) or _known(placement.get("host"))


def placement_columns(result: dict[str, Any]) -> dict[str, Any]:
    """The tidy columns saying where a cell ran: `node` (`node_of`) and `slurm_job_id` (None outside a SLURM job)."""
    scheduler = (result["provenance"].get("placement") or {}).get("scheduler") or {}
    return {
        "node": node_of(result),
        "slurm_job_id": _known(scheduler.get("job_id")) if scheduler.get("name") == "slurm" else None,
    }


def device_columns(result: dict[str, Any]) -> dict[str, Any]:
    """The tidy columns naming what a cell computed on: the framework's `device` name and `platform` (cuda, cpu) and
    the host's `cpu_model` (on a CPU the device name is just "cpu", so the CPU model is what names the hardware)."""
    device = (result["provenance"].get("framework") or {}).get("device") or {}
    return {
        "device": device.get("name"),
        "platform": device.get("platform"),
        "cpu_model": result["provenance"].get("cpu_model"),
    }


def _tidy_view(cell: Any) -> tuple[str, dict[str, Any]]:
    """(variant, tidy columns) of a cell given as a result or as a tidy row (a dict or a pandas row): two modes of
    one framework stay two entries."""
    if isinstance(cell, dict) and "cell" in cell and "provenance" in cell:
        name = variant_key(cell["cell"]["framework"], cell_mode(cell["cell"]))
        return name, device_columns(cell) | placement_columns(cell)
    name = variant_key(str(cell["framework"]), cell_mode(cell))
    return name, {key: cell.get(key) for key in ("device", "platform", "cpu_model", "node")}


def device_model(platform: object, device: object, cpu_model: object) -> tuple[str | None, str | None]:
    """(platform, model) a cell computed on: the GPU's name on a GPU, the CPU's model on a CPU. Results without a
    platform named the CPU device "cpu"; None where it is not recorded."""
    platform, device = _known(platform), _known(device)
    if platform is None and device is not None and device.lower() == "cpu":
        platform = "cpu"
    return platform, _known(cpu_model) if platform == "cpu" else device


@dataclass(frozen=True)
class PlacementCheck:
    """Where the cells of one comparison ran, per variant (`variant_key`: the framework, with its mode where that is
    not the primary one): the device model (platform, model) and the node."""

    models: dict[str, tuple[str | None, str | None]]
    nodes: dict[str, str | None]

    @property
    def models_differ(self) -> bool:
        """Known platforms or known models differ (an unknown value never counts as differing)."""
        platforms = {p for p, _ in self.models.values() if p is not None}
        return len(platforms) > 1 or len({m for _, m in self.models.values() if m is not None}) > 1

    @property
    def nodes_differ(self) -> bool:
        return len({n for n in self.nodes.values() if n is not None}) > 1

    def model_values(self, name: Callable[[str], str] = str) -> str:
        """Each framework's device model, e.g. "torch NVIDIA A100-SXM4-80GB, jax NVIDIA H100 80GB HBM3" (the platform
        added where the platforms differ); `name` writes the framework (names.framework_name for prose: "PyTorch")."""
        with_platform = len({p for p, _ in self.models.values() if p is not None}) > 1
        return ", ".join(
            f"{name(framework)} {model or 'unknown'}" + (f" ({platform or 'unknown'})" if with_platform else "")
            for framework, (platform, model) in self.models.items()
        )

    def node_values(self, name: Callable[[str], str] = str) -> str:
        """Each framework's node, e.g. "torch gpu01, jax gpu02"; `name` as for `model_values`."""
        return ", ".join(f"{name(framework)} {node or 'unknown'}" for framework, node in self.nodes.items())

    @property
    def models_detail(self) -> str | None:
        return f"device models differ: {self.model_values()}" if self.models_differ else None

    @property
    def nodes_detail(self) -> str | None:
        return f"nodes differ: {self.node_values()}" if self.nodes_differ else None


def check_placement(cells: Iterable[Any]) -> PlacementCheck:
    """Whether two or more cells of one comparison (results or tidy rows, one per framework and mode) ran on
    different device models or different nodes: a ratio between them is refused, respectively marked (see
    `speedups`)."""
    models, nodes = {}, {}
    for cell in cells:
        framework, columns = _tidy_view(cell)
        models[framework] = device_model(columns["platform"], columns["device"], columns["cpu_model"])
        nodes[framework] = _known(columns["node"])
    return PlacementCheck(models, nodes)
