"""Import TensorFlow (and Keras on its TensorFlow backend) without loading JAX into the process.

`import tensorflow` imports JAX whenever JAX is installed: TFLite's helpers (tensorflow/lite/python/util.py) try
`from jax import jit` for an optional converter path. In a TensorFlow cell's process that would load a second
framework, whose import time and memory would count against TensorFlow (a measuring process loads only its own
framework). So the first import of TensorFlow runs with JAX hidden, which TFLite handles as "JAX not installed";
JAX stays importable afterwards. Every module of fwbench that needs TensorFlow or Keras imports them from here.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # TensorFlow's info lines (CPU features) are not warnings


def _import_without_jax():
    if "tensorflow" in sys.modules or "jax" in sys.modules:
        import tensorflow

        return tensorflow
    sys.modules["jax"] = None  # a None entry makes `import jax` raise ImportError
    try:
        import tensorflow
    finally:
        del sys.modules["jax"]
    return tensorflow


tf = _import_without_jax()

import keras  # noqa: E402  (after TensorFlow: Keras imports it)

__all__ = ["keras", "tf"]
