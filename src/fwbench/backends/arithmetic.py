"""What arithmetic a cell computed in, read from what ran: a compiled XLA program's float32 matmuls and convolutions
op by op (`xla_arithmetic`), and a cell's or a parity pair's arithmetic from their records (`arithmetic_of`,
`coarsest_arithmetic`).

A cell's `tf32_scope` must say what ran, not what was asked for: in the first GPU study JAX's scope was set from the
precision setting, and a reader could not tell whether the program XLA compiled agreed. XLA keeps each dot's and
convolution's precision on the instruction through optimisation (`operand_precision={highest,highest}` on a dot or
convolution, `"operand_precision":["HIGHEST","HIGHEST"]` in a cuBLAS or cuDNN custom call's backend config; nothing
where it is DEFAULT), so the compiled HLO says, op by op, which precision each float32 matmul and convolution
computes at. On an NVIDIA GPU since Ampere, DEFAULT and HIGH are TF32 and HIGHEST is true FP32; a CPU has no TF32.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from fwbench.backends.base import TF32_NONE, tf32_scope
from fwbench.models.registry import spec

# The instructions that are matmuls or convolutions, as XLA prints them before and after the GPU rewrites them into
# library calls (cuBLAS GEMMs, cuDNN convolutions, and their fused forms).
_KINDS = (
    ("matmuls", re.compile(r" dot\(|__cublas\$|cublas\$lt|__triton_gemm")),
    ("convolutions", re.compile(r" convolution\(|__cudnn\$conv")),
)
_ATTRIBUTE = re.compile(r"operand_precision=\{([a-z_,]+)\}")
_BACKEND_CONFIG = re.compile(r'"operand_precision":\s*\[([^\]]*)\]')
_FLOAT32_RESULT = re.compile(r"=\s*\(?f32\[")
# Precisions that compute float32 inputs in true FP32 (HIGHEST); DEFAULT and HIGH round them to TF32 on Ampere+.
_FULL = frozenset({"highest"})


def _precision(line: str) -> str:
    """An instruction's operand precision ("highest", "high", "default"): the weakest of its operands'."""
    found = _ATTRIBUTE.search(line) or _BACKEND_CONFIG.search(line)
    if not found:
        return "default"
    values = {v.strip().strip('"').lower() for v in found.group(1).split(",") if v.strip()}
    values = {"default" if v in ("", "default", "unset") else v for v in values}
    return "highest" if values <= _FULL else ("high" if "high" in values else "default")


def xla_precisions(hlo_text: str) -> dict[str, dict[str, int]]:
    """{"matmuls": {precision: count}, "convolutions": {...}} over the float32 matmul and convolution instructions
    of an HLO module's text (bfloat16 ones compute in bfloat16, whatever their precision says)."""
    counts: dict[str, Counter] = {kind: Counter() for kind, _ in _KINDS}
    for line in hlo_text.splitlines():
        if not _FLOAT32_RESULT.search(line):
            continue
        for kind, pattern in _KINDS:
            if pattern.search(line):
                counts[kind][_precision(line)] += 1
                break
    return {kind: dict(sorted(counter.items())) for kind, counter in counts.items()}


def xla_arithmetic(hlo_text: str, *, on_gpu: bool, configured_scope: str) -> dict[str, Any]:
    """What a compiled program computed in: the counts by precision (`xla_precisions`), and the TF32 scope they give
    on this device (a kind of op is TF32 where any of its float32 instructions is not HIGHEST, on a GPU). A program
    in which no float32 matmul or convolution was found (a library call this reading does not know) keeps the
    scope its setting gives, `configured_scope`, and says so."""
    counts = xla_precisions(hlo_text)
    if not any(counts.values()):
        return {
            "source": "the precision setting: no float32 matmul or convolution found in the compiled program",
            "precisions": counts,
            "tf32_scope": configured_scope,
            "tf32_in_effect": configured_scope != TF32_NONE,
        }
    reduced = {kind: any(p not in _FULL for p in by) for kind, by in counts.items()}
    scope = tf32_scope(on_gpu, reduced["matmuls"], reduced["convolutions"])
    return {
        "source": "the compiled program's HLO (operand precision of each float32 matmul and convolution)",
        "precisions": counts,
        "tf32_scope": scope,
        "tf32_in_effect": scope != TF32_NONE,
    }


def arithmetic_of(dtype: Any, scope: Any, model: str) -> str:
    """The arithmetic a cell's float32 work mostly ran in, from what it recorded: bf16 where its dtype is bfloat16,
    tf32 where TF32 covered the kind of op that does most of the model's arithmetic (`ModelSpec.compute`: the
    convolutions of a CNN, the matmuls of a ViT), fp32 otherwise. Its MFU divides by that arithmetic's peak."""
    if str(dtype).endswith("bfloat16"):
        return "bf16"
    scope = str(scope or "none")
    if scope == "matmuls and convolutions":
        return "tf32"
    try:
        compute = spec(model).compute
    except KeyError:  # a test's fake model: convolutional
        compute = "convolutions"
    return "tf32" if scope == compute else "fp32"


def coarsest_arithmetic(*settings: Mapping[str, Any]) -> str:
    """The coarsest arithmetic among the recorded settings: bf16 where any computed in bfloat16, tf32 where any had
    TF32 in effect anywhere (a parity bound must allow for every op's rounding, not only the dominant kind's, as
    `arithmetic_of` reads it), fp32 otherwise. Read from what ran, so `default` on a GPU is TF32 where a framework
    used it and fp32 on a CPU."""
    if any(str(s.get("dtype", "")).endswith("bfloat16") for s in settings):
        return "bf16"
    if any((s.get("tf32_scope") or TF32_NONE) != TF32_NONE for s in settings):
        return "tf32"
    return "fp32"
