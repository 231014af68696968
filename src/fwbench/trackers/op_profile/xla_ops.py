"""XLA's mapping table, shared by JAX and TensorFlow's XLA clusters: HLO opcodes, custom-call targets (oneDNN,
cuDNN, cuBLAS) and the instruction names XLA gives fusions and custom calls, to the categories.

A profiler event names an HLO instruction (`convolution.12`, `add_rsqrt_fusion.1`, `ynn_fusion`, `custom-call.3`),
not its opcode. With the compiled module's HLO text (`HloIndex`), an instruction is read for what it is: its
opcode, and for a fusion the heaviest op of its fused computation (nested fusions and calls followed), for a
custom call its target. Without it, the name is read: XLA names a fusion after the ops it fused
(`broadcast_multiply_fusion`) and most instructions after their opcode, so the words of the name are looked up,
the heaviest winning. A name whose words say nothing (`ynn_fusion`, `fusion.3`) is left unmapped.
"""

from __future__ import annotations

import re
from functools import cache

from fwbench.trackers.op_profile.categories import heaviest


def _names(category: str, text: str) -> dict[str, str]:
    return dict.fromkeys(text.split(), category)


HLO_OPCODES: dict[str, str] = {
    **_names("convolution", "convolution"),
    **_names("matmul", "dot ragged-dot"),
    **_names("normalization", "batch-norm-inference batch-norm-training batch-norm-grad"),
    **_names(
        "elementwise",
        """add subtract multiply divide maximum minimum exponential exp log rsqrt sqrt cbrt tanh logistic negate abs
        compare select clamp convert power erf and or not xor sign floor ceil round-nearest-even round-nearest-afz
        exponential-minus-one log-plus-one remainder atan2 cosine sine tan is-finite popcnt shift-left
        shift-right-arithmetic shift-right-logical map reduce-precision stochastic-convert real imag complex
        count-leading-zeros""",
    ),
    **_names("pooling_reduction", "reduce reduce-window select-and-scatter sort all-reduce reduce-scatter topk"),
    **_names(
        "data_movement",
        """transpose copy copy-start copy-done pad slice dynamic-slice dynamic-update-slice concatenate reshape
        dynamic-reshape broadcast bitcast bitcast-convert gather scatter reverse iota tuple get-tuple-element send
        send-done recv recv-done all-gather all-gather-start all-gather-done all-to-all collective-permute
        collective-permute-start collective-permute-done""",
    ),
    **_names(
        "other",
        """parameter constant call conditional while after-all partition-id replica-id infeed outfeed rng
        rng-bit-generator rng-get-and-update-state optimization-barrier domain add-dependency async-start
        async-update async-done get-dimension-size set-dimension-size""",
    ),
}

# Custom-call targets by the words in them (`__onednn$convolution`, `__cudnn$convBiasActivationForward`,
# `__cublas$lt$matmul`, `__cudnn$fmhaSoftmax`); first match wins.
CUSTOM_CALL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"fmha|flash|attention|sdpa", re.I), "attention"),
    # cuDNN's convolution kernels: forward, data- and weight-gradient implicit GEMMs (sm80_xmma_fprop_implicit_gemm_...)
    # (conv but not convert: XLA's loop_convert_fusion is a dtype conversion)
    (re.compile(r"conv(?!ert)|fprop|dgrad|wgrad|implicit_?gemm|winograd|fft2d|_nhwckrsc", re.I), "convolution"),
    (re.compile(r"gemm|matmul|dot|cublas", re.I), "matmul"),
    (re.compile(r"norm", re.I), "normalization"),
    (re.compile(r"softmax|topk|reduce|pool", re.I), "pooling_reduction"),
    (re.compile(r"transpose|copy|layout", re.I), "data_movement"),
)

# Words of instruction names that are not opcodes: XLA:GPU's names for custom calls and library fusions, and the
# words XLA:CPU and XLA:GPU put in fusion names. None: the word says nothing (the HLO text must).
NAME_WORDS: dict[str, str | None] = {
    "cudnn-conv": "convolution",
    "cudnn-conv-bias-activation": "convolution",
    "cudnn-conv-bias": "convolution",
    "conv": "convolution",
    "cublas-gemm": "matmul",
    "cublas-lt-matmul": "matmul",
    "gemm": "matmul",
    "matmul": "matmul",
    "cudnn-fmha": "attention",
    "fmha": "attention",
    "softmax": "pooling_reduction",
    "cudnn-norm": "normalization",
    "fusion": None,
    "loop": None,
    "input": None,
    "output": None,
    "wrapped": None,
    "ynn": None,
    "xnn": None,
    "custom-call": None,
    "triton": None,
    "onednn": None,
    "kernel": None,
}

_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<rest>.*)$")
_OPCODE = re.compile(r"(?<![\w\-$])(?P<op>[a-z][a-z0-9\-]*)\(")
_COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s.*\{\s*$")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition)=\{?%?(?P<callee>[\w.\-]+)")
_TARGET = re.compile(r'custom_call_target="(?P<target>[^"]+)"')
_SUFFIX = re.compile(r"\.\d+$")


def target_category(target: str) -> str | None:
    """A custom call's category by its target's words; None when they say nothing known."""
    return next((category for pattern, category in CUSTOM_CALL_PATTERNS if pattern.search(target)), None)


@cache
def name_category(name: str) -> str | None:
    """The category an instruction's name alone says: its opcode (`convolution.12`), a known library name
    (`cudnn-conv-bias-activation.1`) or, for a fusion, the heaviest of the opcodes its name lists
    (`add_rsqrt_fusion.1`); None when no word of it is known."""
    base = _SUFFIX.sub("", name.strip().lstrip("%"))
    if base in HLO_OPCODES:
        return HLO_OPCODES[base]
    if NAME_WORDS.get(base):
        return NAME_WORDS[base]
    words = [word for word in re.split(r"[_.]", base) if word]
    categories = []
    for word in words:
        category = HLO_OPCODES.get(word) if word in HLO_OPCODES else NAME_WORDS.get(word)
        if category is None and word not in NAME_WORDS:
            category = target_category(word) if word.startswith("__") else None
        if category is not None:
            categories.append(category)
    # A name such as `fusion.3` or `ynn_fusion` names no op: nothing known, even though "other" was seen.
    return heaviest(category for category in categories if category != "other")


class HloIndex:
    """Instruction name -> category, read from a compiled module's HLO text (`as_text()` of a compiled JAX
    executable, TensorFlow's optimized HLO). A fusion or call is the heaviest op of what it calls."""

    def __init__(self, text: str | None = None):
        self.opcode: dict[str, str] = {}
        self.callees: dict[str, list[str]] = {}
        self.targets: dict[str, str] = {}
        self.computations: dict[str, list[str]] = {}
        if text:
            self.add(text)

    def add(self, text: str) -> None:
        """Read one module's text (a trace may hold several modules; instruction names are kept per name)."""
        current: list[str] | None = None
        for line in text.splitlines():
            computation = _COMPUTATION.match(line)
            if computation and "=" not in line.split("(")[0]:
                current = self.computations.setdefault(computation["name"], [])
                continue
            instruction = _INSTRUCTION.match(line)
            if not instruction:
                continue
            opcode = _OPCODE.search(instruction["rest"])
            if not opcode:
                continue
            name = instruction["name"]
            self.opcode[name] = opcode["op"]
            self.callees[name] = [call["callee"] for call in _CALLS.finditer(instruction["rest"])]
            target = _TARGET.search(instruction["rest"])
            if target:
                self.targets[name] = target["target"]
            if current is not None:
                current.append(name)

    def __len__(self) -> int:
        return len(self.opcode)

    def category(self, name: str) -> str | None:
        """The instruction's category, or None when the text does not hold it or says nothing known."""
        return self._category(name.strip().lstrip("%"), frozenset())

    def _category(self, name: str, seen: frozenset[str]) -> str | None:
        opcode = self.opcode.get(name)
        if opcode is None:
            return None
        if opcode == "custom-call":
            return target_category(self.targets.get(name, ""))
        if opcode in ("fusion", "call", "while", "conditional", "async-start"):
            inner = [
                self._category(inner, seen | {callee})
                for callee in self.callees.get(name, [])
                if callee not in seen
                for inner in self.computations.get(callee, [])
            ]
            found = heaviest(category for category in inner if category and category != "other")
            return found or ("other" if opcode != "fusion" else None)
        return HLO_OPCODES.get(opcode)


def category(name: str, index: HloIndex | None = None) -> str | None:
    """An instruction's category: from the HLO text when it holds the name, else from the name's words."""
    found = index.category(name) if index is not None else None
    return found or name_category(name)
