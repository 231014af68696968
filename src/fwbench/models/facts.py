"""Model facts for the paper: parameter counts and FLOPs per image, counted independently in each framework.

FLOPs are reported as 2 x multiply-accumulates, each figure named by its counter: PyTorch's
torch.utils.flop_counter.FlopCounterMode (counts matmuls, convolutions and attention only) and XLA's
cost_analysis() of the compiled forward pass (also counts elementwise work such as BatchNorm, activations, softmax
and residual adds, but skips convolution taps that only read zero padding, which matters on the small feature maps
of low resolutions). Where the two differ by more than 10%, the note says why.
"""

from __future__ import annotations

from typing import Any

AGREEMENT = 0.10


def torch_facts(name: str, *, num_classes: int, image_size: int) -> dict[str, Any]:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from fwbench.models import torch_model

    torch.manual_seed(0)
    model = torch_model(name, num_classes=num_classes, image_size=image_size).eval()
    counter = FlopCounterMode(display=False)
    # Gradients stay enabled: without them nn.MultiheadAttention takes its fused fast path
    # (torch._native_multi_head_attention), which FlopCounterMode cannot see, and ViT would lose a third of its FLOPs.
    with counter:
        model(torch.zeros(1, 3, image_size, image_size))
    by_op = {
        str(op).split(".")[-2] if "." in str(op) else str(op): int(n)
        for op, n in counter.get_flop_counts().get("Global", {}).items()
    }
    return {
        "params": int(sum(p.numel() for p in model.parameters())),
        "flops": int(counter.get_total_flops()),
        "flops_by_op": by_op,
        "counter": "torch.utils.flop_counter.FlopCounterMode",
    }


def jax_facts(name: str, *, num_classes: int, image_size: int) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from fwbench.models import flax_model

    module = flax_model(name, num_classes=num_classes, image_size=image_size)
    x = jax.ShapeDtypeStruct((1, image_size, image_size, 3), jnp.float32)
    # Shapes only: counting needs no weights, and a real Flax init of ViT-B/16 takes minutes op by op.
    variables = jax.eval_shape(lambda inputs: module.init(jax.random.PRNGKey(0), inputs), x)
    compiled = jax.jit(lambda v, inputs: module.apply(v, inputs, train=False)).lower(variables, x).compile()
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list | tuple):  # older jaxlibs return one dict per device
        analysis = analysis[0]
    return {
        "params": int(sum(np.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(variables["params"]))),
        "flops": int(analysis["flops"]),
        "counter": "XLA compiled.cost_analysis()['flops']",
    }


def compare(name: str, *, num_classes: int, image_size: int) -> dict[str, Any]:
    t, j = (
        torch_facts(name, num_classes=num_classes, image_size=image_size),
        jax_facts(name, num_classes=num_classes, image_size=image_size),
    )
    difference = (j["flops"] - t["flops"]) / t["flops"]
    if t["params"] != j["params"]:
        note = f"parameter counts differ ({t['params']} vs {j['params']})"
    elif abs(difference) <= AGREEMENT:
        note = "counters agree within 10%"
    elif difference > 0:
        note = "XLA also counts elementwise ops (BatchNorm, activations, softmax, adds); FlopCounterMode does not"
    else:
        note = "XLA counts only convolution taps that read input, not zero padding (most 3x3 taps at this size)"
    return {
        "model": name,
        "image_size": image_size,
        "num_classes": num_classes,
        "params_torch": t["params"],
        "params_flax": j["params"],
        "flops_torch": t["flops"],
        "flops_xla": j["flops"],
        "flops_difference": difference,
        "torch_counter": t["counter"],
        "xla_counter": j["counter"],
        "note": note,
    }


REFERENCE = {"num_classes": 1000, "image_size": 224}  # torchvision's published configuration


def write_facts(name: str, *, num_classes: int, image_size: int, out) -> list[dict[str, Any]]:
    """Facts at the study's configuration and at torchvision's reference one (1000 classes, 224 px)."""
    from fwbench.io import atomic_write_json

    rows = [compare(name, num_classes=num_classes, image_size=image_size) | {"configuration": "study"}]
    if (num_classes, image_size) != (REFERENCE["num_classes"], REFERENCE["image_size"]):
        rows.append(compare(name, **REFERENCE) | {"configuration": "reference"})
    atomic_write_json(out, rows)
    return rows
