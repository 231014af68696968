"""Partner check: a GPU cell is compared with the same cell in every other framework, and flagged where the two
ran under different comparable settings (another GPU model, TF32 in one only, another dtype, another CUDA major
version). A ratio between such cells would measure the settings, not the frameworks, so the table marks them.
Partners that ran with different workarounds from the fallback ladder are flagged apart (`deviation_differs`)."""

from __future__ import annotations

from typing import Any

import pandas as pd

# Columns of the tidy table that must match between partners on a GPU; framework-specific knobs (cuDNN benchmark
# mode, XLA_FLAGS) are recorded and printed in the setup table but are not comparable one to one.
COMPARED = {"device": "GPU", "tf32_in_effect": "TF32", "dtype": "dtype", "cuda_major": "CUDA major"}
PARTNER_KEYS = ["suite", "model", "precision", "batch_size"]


def flag_partners(frame: pd.DataFrame) -> pd.DataFrame:
    """Add `settings_differ` (bool) and `settings_differ_detail` (what differs, e.g. "TF32: torch True, jax
    False") to every row; CPU cells and failed cells are never flagged."""
    frame = frame.copy()
    frame["settings_differ"] = False
    frame["settings_differ_detail"] = None
    on_gpu = (frame["status"] == "ok") & (frame["platform"] == "cuda")
    for _, group in frame[on_gpu].groupby(PARTNER_KEYS, sort=False):
        if group["framework"].nunique() < 2:
            continue
        details = []
        for column, label in COMPARED.items():
            values = group.set_index("framework")[column]
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
    from before the fallback ladder) is not flagged."""
    keys = keys or PARTNER_KEYS
    frame = frame.copy()
    frame["deviation_differs"] = False
    if "deviations" not in frame:
        return frame
    ok = frame[frame["status"] == "ok"]
    for _, group in ok.groupby(keys, sort=False):
        per_framework = group.groupby("framework", sort=False)["deviations"].first()
        if len(per_framework) > 1 and deviations_differ(*per_framework.tolist()):
            frame.loc[group.index, "deviation_differs"] = True
    return frame
