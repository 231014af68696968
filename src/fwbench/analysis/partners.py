"""Partner check: a GPU cell is compared with the same cell in every other framework, and flagged where the two
ran under different comparable settings (another GPU model, TF32 in one only, another dtype, another CUDA major
version). A ratio between such cells would measure the settings, not the frameworks, so the table marks them."""

from __future__ import annotations

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
