"""The names a reader meets in the paper's prose, the README and the HTML report: ResNet-50 rather than `resnet50`,
"compiled PyTorch" rather than `torch/compile`, FP32 rather than `fp32`.

Identifiers stay what files, table keys and the command line use; every sentence, caption and figure label a reader
reads goes through these functions, so a name is spelt one way everywhere and the paper check
(fwbench.analysis.paper.structure_check) can fail a paper in which an identifier reached the prose. A model the
registry does not know (a user's own) keeps its identifier with underscores as spaces, never a LaTeX error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fwbench.models.registry import MODELS

# Framework names in prose: PyTorch, JAX and TensorFlow (their Flax and Keras front ends are the paper's setup, not
# part of every sentence that names a framework).
FRAMEWORK_NAMES = {"torch": "PyTorch", "jax": "JAX", "tensorflow": "TensorFlow", "numpy": "NumPy"}
# What each mode adds to a framework's name where the framework ran in more than one: "compiled PyTorch".
MODE_ADJECTIVES = {
    "eager": "eager",
    "compile": "compiled",
    "cudagraphs": "CUDA-graph",
    "jit": "jitted",
    "xla": "XLA-compiled",
}
PRECISION_NAMES = {
    "fp32": "FP32",
    "tf32": "TF32",
    "bf16": "BF16",
    "fp16": "FP16",
    "default": "each framework's default float32",
}


def model_name(model: str) -> str:
    """ "ResNet-50" for `resnet50`; an unknown model's identifier with its underscores as spaces."""
    spec = MODELS.get(str(model))
    return spec.display if spec is not None and spec.display else str(model).replace("_", " ")


def model_in_text(model: str) -> str:
    """A model named inside a sentence: "ResNet-50", but "the small CNN" (a display name that is a common noun, not a
    proper one, takes the article)."""
    name = model_name(model)
    spec = MODELS.get(str(model))
    return f"the {name}" if spec is not None and spec.display and name[:1].islower() else name


def models_in_text(models: Iterable[str]) -> list[str]:
    """Several models named inside a sentence, in the identifiers' order: ["EfficientNet-B0", "the small CNN"]."""
    return [model_in_text(model) for model in sorted(dict.fromkeys(str(m) for m in models))]


def model_family(model: str) -> str:
    """The kind of model a finding generalises over: "CNN" or "transformer" (a model the registry does not know:
    "model")."""
    spec = MODELS.get(str(model))
    return spec.family if spec is not None else "model"


def framework_name(framework: str) -> str:
    """ "PyTorch", "JAX", "TensorFlow", "NumPy" (an unknown framework: its identifier)."""
    return FRAMEWORK_NAMES.get(str(framework), str(framework))


def variant_name(framework: str, mode: str | None, *, alone: bool = True) -> str:
    """A framework in one execution mode, as people write it: "compiled PyTorch", "eager PyTorch"; a framework that
    ran in one mode only (`alone`), or that always compiles (JAX's jit, TensorFlow's XLA), is its name alone."""
    name = framework_name(framework)
    if alone or not mode or mode in ("jit", "xla"):
        return name
    return f"{MODE_ADJECTIVES.get(str(mode), str(mode))} {name}"


def precision_name(precision: str) -> str:
    return PRECISION_NAMES.get(str(precision), str(precision).upper())


def display_or_same(name: str) -> str:
    """A registered model's display name; any other name (a micro suite's operation, a user's own model) as it
    is, for a column that holds both."""
    spec = MODELS.get(str(name))
    return spec.display if spec is not None and spec.display else str(name)


def _identifier_words() -> re.Pattern[str]:
    # An identifier as a word of its own: not inside a longer name, nor a file's or path's part ("resnet50.npz").
    names = "|".join(re.escape(name) for name in sorted(identifiers(), key=len, reverse=True))
    return re.compile(rf"(?<![\w./-])(?:{names})(?![\w/-]|\.\w)")


def with_display_names(text: str) -> str:
    """`text` (a cell's coordinates: "inference jax efficientnet_b0 fp32 bs1") with every registered model's
    identifier that stands as a word of its own replaced by its display name, for a table that prints text whose
    data (a CSV) keeps the identifiers; a file name or path that holds one is left as it is."""
    if not identifiers():
        return str(text)
    return _identifier_words().sub(lambda match: model_name(match.group(0)), str(text))


def identifiers() -> set[str]:
    """The configuration identifiers that must not reach the prose: every registered model's name that differs from
    its display name (`resnet50`, `vit_b_16`, `small_cnn`, ...)."""
    return {name for name, spec in MODELS.items() if spec.display and spec.display != name}
