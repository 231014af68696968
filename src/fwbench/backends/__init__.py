"""Framework backends behind one interface (fwbench.backends.base.Backend), imported by name on demand."""

from __future__ import annotations

import importlib

from fwbench.backends.base import Backend

FRAMEWORKS = {"torch": "fwbench.backends.torch:TorchBackend", "jax": "fwbench.backends.jax:JaxBackend"}


def backend_class(framework: str) -> type[Backend]:
    """The backend class of `framework`, importing only that framework."""
    try:
        ref = FRAMEWORKS[framework]
    except KeyError:
        raise KeyError(f"unknown framework {framework!r}; known: {sorted(FRAMEWORKS)}") from None
    module, _, cls = ref.partition(":")
    return getattr(importlib.import_module(module), cls)


def get_backend(framework: str, *, threads: int, precision: str) -> Backend:
    return backend_class(framework)(threads=threads, precision=precision)
