"""Where the time goes (issue 35): a cell's forward steps under its framework's own profiler, reduced to the time
per step in each operation category and the most expensive operations, in one form for every framework.

`profile_steps` captures (capture.py); `torch_trace` and `xspace` reduce what PyTorch's and XLA's profilers write;
one mapping table per framework (`torch_ops`, `xla_ops`, `tf_ops`) takes names to `CATEGORIES`. See
docs/op-profile.md.
"""

from fwbench.trackers.op_profile.capture import profile_steps
from fwbench.trackers.op_profile.categories import CATEGORIES, KEYS, summarise
from fwbench.trackers.op_profile.torch_trace import reduce_trace
from fwbench.trackers.op_profile.xspace import reduce_xspace

__all__ = ["CATEGORIES", "KEYS", "profile_steps", "reduce_trace", "reduce_xspace", "summarise"]
