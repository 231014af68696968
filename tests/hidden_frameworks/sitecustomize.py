"""Makes the frameworks named in FWBENCH_TESTS_HIDE (comma-separated top-level modules) impossible to find or import
in a process started with this directory on PYTHONPATH: an environment without them, for tests of what fwbench does
there (a study naming a missing framework, a results archive restored where no framework is installed), without a
second 8 GB environment."""

from __future__ import annotations

import os
import sys

HIDDEN = frozenset(filter(None, os.environ.get("FWBENCH_TESTS_HIDE", "").split(",")))


class _Hidden:
    """First on sys.meta_path: a hidden module (or one of its submodules) is not there."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by tests/hidden_frameworks)", name=name)
        return None


if HIDDEN:
    sys.meta_path.insert(0, _Hidden())
