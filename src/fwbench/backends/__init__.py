"""Framework backends behind one interface (fwbench.backends.base.Backend), imported by name on demand."""

from __future__ import annotations

import importlib

from fwbench.backends.base import Framework

# NumPy is the micro suite's baseline (no models): fwbench.study.grid.suite_frameworks adds it there. Each framework's
# execution modes are registered in fwbench.study.modes (no framework import there: the grid and the schema use it).
FRAMEWORKS = {
    "torch": "fwbench.backends.torch:TorchBackend",
    "jax": "fwbench.backends.jax:JaxBackend",
    "tensorflow": "fwbench.backends.tensorflow:TensorflowBackend",
    "numpy": "fwbench.backends.numpy:NumpyBackend",
}


def backend_class(framework: str) -> type[Framework]:
    """The backend class of `framework`, importing only that framework."""
    try:
        ref = FRAMEWORKS[framework]
    except KeyError:
        raise KeyError(f"unknown framework {framework!r}; known: {sorted(FRAMEWORKS)}") from None
    module, _, cls = ref.partition(":")
    return getattr(importlib.import_module(module), cls)


def get_backend(framework: str, *, threads: int, precision: str, **options) -> Framework:
    """`options`: the execution mode and the study's autotune and compile settings (Framework.__init__)."""
    return backend_class(framework)(threads=threads, precision=precision, **options)
