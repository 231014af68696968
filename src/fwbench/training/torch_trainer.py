"""PyTorch trainer: eager or (modes compile and cudagraphs) torch.compile'd model calls in train mode,
torch.optim.Adam with the step's learning rate set from the shared schedule.

In a compiled mode every call of the model (the train step's forward, whose backward AOTAutograd compiles with it;
evaluation; the step-0 probe) goes through one torch.compile'd function, so each variant Dynamo guards on
(train/eval, grad mode) is compiled in `compile`, before the timed epochs. BatchNorm recalibration stays eager (its
cumulative average would break the graph; it is no timed step). Adam's
update stays torch's fused kernel: compiling it would recompile at every new learning rate of the schedule.

Batches arrive in NCHW (`input_layout`): the shared loader's threads transpose them, so the timed step only moves
them to the device, as the JAX step does with its NHWC batches. Where the cell lays PyTorch's tensors out
channels_last (the study's `memory_format.torch`, chosen by the backend), the model's weights are channels_last and
batches arrive in NHWC, the bytes a channels_last NCHW tensor holds: the step moves them without a transpose either.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from fwbench.io import atomic_stream
from fwbench.training.firstcall import first_call_extra
from fwbench.training.recipe import Recipe
from fwbench.training.trainer import STATISTICS, Trainer

ADAM_IMPLEMENTATIONS = ("fused", "foreach", "single-tensor")


def adam_implementation(device_type: str) -> str:
    """torch's fused Adam (one kernel over all parameters) where it has one for the device, else the foreach
    (multi-tensor) one; never the per-tensor loop, which launches ~10 kernels per parameter tensor on a GPU."""
    return "fused" if device_type in ("cuda", "cpu") else "foreach"


def adam(parameters, recipe: Recipe, implementation: str = "fused") -> torch.optim.Adam:
    """All of torch's Adam implementations compute the same update; the test suite checks each against optax's
    step for step."""
    if implementation not in ADAM_IMPLEMENTATIONS:
        raise ValueError(f"Adam implementation {implementation!r}: not one of {ADAM_IMPLEMENTATIONS}")
    choice = {"fused": {"fused": True}, "foreach": {"foreach": True}, "single-tensor": {"foreach": False}}
    return torch.optim.Adam(
        parameters,
        lr=recipe.lr,
        betas=recipe.betas,
        eps=recipe.eps,
        weight_decay=recipe.weight_decay,
        **choice[implementation],
    )


def _loss(logits: torch.Tensor, labels: torch.Tensor, valid: int | None = None) -> torch.Tensor:
    """Cross-entropy, the mean over the batch, or over its first `valid` rows when the rest pads a partial batch."""
    if valid is None or valid >= len(labels):
        return F.cross_entropy(logits, labels)
    return F.cross_entropy(logits[:valid], labels[:valid])


def _call_model(model: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The one function a compiled trainer compiles: the model's forward (module as an argument, so copies of the
    model for the first-call measurement and the probe reuse the compiled code where Dynamo's guards allow)."""
    return model(images)


def _is_statistic(key: str) -> bool:
    return "running" in key or "num_batches" in key


def _randomness_off(model: torch.nn.Module) -> None:
    """Train mode (batch statistics) with dropout and stochastic depth off, as the JAX probe runs."""
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) or type(module).__name__ == "StochasticDepth":
            module.eval()


class TorchTrainer(Trainer):
    input_layout = "NCHW"

    def __init__(self, backend, model: str, state_dict: Mapping[str, np.ndarray], *, num_classes, image_size, recipe):
        self.backend, self.recipe = backend, recipe
        module = backend.new_model(model, num_classes=num_classes, image_size=image_size)
        module.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in state_dict.items()}, strict=True)
        memory_format = backend.choose_memory_format(model)
        self.model = module.to(dtype=backend.dtype).to(memory_format=memory_format).to(backend.device).train()
        backend.record_layout(module=self.model)
        self.channels_last = memory_format == torch.channels_last
        self.input_layout = "NHWC" if self.channels_last else "NCHW"
        self.layout_recorded = False
        self.adam = adam_implementation(backend.device.type)
        self.optimizer = adam(self.model.parameters(), recipe, self.adam)
        self.optimizer_implementation = f"torch.optim.Adam, {self.adam}"
        self.recalibrated: dict[str, torch.Tensor] | None = None
        compiled = backend.compile_mode is not None
        self.call = backend._compile(_call_model) if compiled else _call_model
        self.compiled_scope = (
            "torch.compile(model forward; backward through AOTAutograd); Adam eager (fused)" if compiled else None
        )

    def to_device(self, images, labels):
        """`images`: a normalised float32 batch in `input_layout` (NCHW, or NHWC for channels_last), as the shared
        loader prepares it; an NCHW tensor on the device in the cell's layout."""
        images = torch.from_numpy(np.asarray(images, np.float32))
        if self.channels_last:
            images = images.permute(0, 3, 1, 2)  # NCHW strides over the NHWC bytes: channels_last, no copy
        # cast on the host, then move, as the JAX trainer does
        images = images.to(dtype=self.backend.dtype).to(self.backend.device)
        if not self.layout_recorded:  # once: this runs inside every timed step
            self.backend.record_layout(inputs=images)
            self.layout_recorded = True
        return images, torch.from_numpy(np.asarray(labels, np.int64)).to(self.backend.device)

    def synchronize(self, handle) -> None:
        if self.backend.device.type == "cuda":
            torch.cuda.synchronize(self.backend.device)

    def compile(self, images, labels, *, partial_batches: bool = False, train: bool = True) -> dict[str, float]:
        """Eager PyTorch prepares nothing ahead: its compile/first-call time (fwbench.training.firstcall) is each
        function's first call beyond a steady-state one, the train step's on a copy of the model and optimizer
        before anything else ran. Afterwards Adam's state exists (zeros, step 0, exactly what its first step would
        create), as optax's does from the start, so no timed step allocates it. `train=False` leaves out the train
        steps (for a check that only probes, evaluates and recalibrates)."""
        lr, rows = self.recipe.lr, int(labels.shape[0])
        variants = {"train": None, **({"train_masked": max(1, rows - 1)} if partial_batches else {})}
        timings = self._train_first_calls(images, labels, lr, variants) if train else {}
        for name, statistics in (("eval", "running"), ("eval_batch_statistics", "batch")):
            timings[f"{name}_first_call_extra_s"] = first_call_extra(
                lambda statistics=statistics: self.evaluate(images, labels, rows, statistics=statistics), _done
            )
        if self._batch_norms():
            timings["recalibration_first_call_extra_s"] = first_call_extra(lambda: self.recalibrate([images]), _done)
            self.recalibrated = None
        timings["probe_first_call_extra_s"] = first_call_extra(
            lambda: self._probe(images, labels, lr, self.backend.dtype), _done
        )
        return timings

    def _train_first_calls(self, images, labels, lr: float, variants: Mapping[str, int | None]) -> dict[str, float]:
        model = copy.deepcopy(self.model)
        optimizer = adam(model.parameters(), self.recipe, self.adam)
        timings = {
            f"{name}_first_call_extra_s": first_call_extra(
                lambda valid=valid: self._train_step(model, optimizer, images, labels, lr, 0, valid), self.value
            )
            for name, valid in variants.items()
        }
        if not self.optimizer.state:  # fresh (not resumed): Adam's state as its first step would create it
            for mine, theirs in zip(self.model.parameters(), model.parameters(), strict=True):
                self.optimizer.state[mine] = {k: torch.zeros_like(v) for k, v in optimizer.state[theirs].items()}
        return timings

    def _seed(self, step_index: int) -> None:
        # Dropout masks depend only on (seed, step), so a run resumed at an epoch boundary draws what it would have.
        torch.manual_seed(self.recipe.seed * 1_000_003 + step_index)

    def _train_step(self, model, optimizer, images, labels, lr: float, step_index: int, valid: int | None):
        self._seed(step_index)
        for group in optimizer.param_groups:
            group["lr"] = float(lr)
        optimizer.zero_grad(set_to_none=True)
        loss = _loss(self.call(model, images).float(), labels, valid)
        loss.backward()
        optimizer.step()
        return loss.detach()

    def step(self, images, labels, lr: float, step_index: int, valid: int | None = None):
        return self._train_step(self.model, self.optimizer, images, labels, lr, step_index, valid)

    def value(self, loss) -> float:
        return float(loss.item())

    def _statistics(self) -> dict[str, torch.Tensor]:
        return {k: v.clone() for k, v in self.model.state_dict().items() if _is_statistic(k)}

    def evaluate(self, images, labels, valid: int, *, statistics: str = "running") -> tuple[float, int, int]:
        saved = self._statistics() if statistics != "running" else None
        if statistics == "batch":  # the whole (padded) batch, as the JAX step sees it
            _randomness_off(self.model)
        elif statistics == "recalibrated":
            if self.recalibrated is None:
                raise RuntimeError("evaluate(statistics='recalibrated') before recalibrate()")
            self.model.load_state_dict(self.recalibrated, strict=False)
            self.model.eval()
        elif statistics == "running":
            self.model.eval()
        else:
            raise ValueError(f"statistics = {statistics!r}: not one of {STATISTICS}")
        try:
            with torch.inference_mode():
                logits = self.call(self.model, images).float()[:valid]
                loss = F.cross_entropy(logits, labels[:valid], reduction="sum")
                top = logits.topk(min(5, logits.shape[-1]), dim=1).indices
                hit1 = (top[:, 0] == labels[:valid]).sum()
                hit5 = (top == labels[:valid, None]).any(dim=1).sum()
                return float(loss.item()), int(hit1.item()), int(hit5.item())
        finally:
            self.model.train()
            if saved is not None:
                self.model.load_state_dict(saved, strict=False)

    def _batch_norms(self) -> list[torch.nn.Module]:
        return [m for m in self.model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]

    def recalibrate(self, batches) -> bool:
        norms = self._batch_norms()
        if not norms:
            return False
        saved, momenta = self._statistics(), [m.momentum for m in norms]
        try:
            for norm in norms:
                norm.reset_running_stats()
                norm.momentum = None  # cumulative: running = mean of the batches' statistics
            _randomness_off(self.model)
            with torch.no_grad():
                for images in batches:
                    # Eager in every mode: BatchNorm's cumulative average (momentum None) reads its batch count
                    # with .item(), a graph break under torch.compile; recalibration is no timed step.
                    _call_model(self.model, images)
            if int(norms[0].num_batches_tracked) == 0:
                raise ValueError("recalibrate() needs at least one batch")
            self.recalibrated = self._statistics()
            self.synchronize(None)
        finally:
            for norm, momentum in zip(norms, momenta, strict=True):
                norm.momentum = momentum
            self.model.load_state_dict(saved, strict=False)
            self.model.train()
        return True

    def _probe(self, images, labels, lr: float, dtype, valid: int | None = None) -> dict[str, float]:
        """In the cell's dtype the model is called as the cell calls it (compiled in mode compile); the float64
        yardstick runs eagerly (a compilation of its own for a number that is not the cell's)."""
        call = self.call if dtype == self.backend.dtype else _call_model
        model = copy.deepcopy(self.model).to(dtype)
        _randomness_off(model)
        optimizer = adam(model.parameters(), self.recipe)
        for group in optimizer.param_groups:
            group["lr"] = float(lr)
        images = images.to(dtype)
        loss = _loss(call(model, images).to(torch.promote_types(dtype, torch.float32)), labels, valid)
        loss.backward()
        grads = [p.grad.double().flatten() for p in model.parameters() if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.cat(grads)).item())
        optimizer.step()
        with torch.no_grad():
            after = _loss(call(model, images).to(torch.promote_types(dtype, torch.float32)), labels, valid)
        return {"loss": float(loss.item()), "grad_norm": norm, "loss_after_step": float(after.item())}

    def probe(self, images, labels, lr: float, valid: int | None = None) -> dict[str, float]:
        """Also, in fp32 cells, the same probe in float64: how far PyTorch's own fp32 result is from the exact one
        (Adam's first step is sign-like, so ill-conditioned gradients can make this large), the yardstick for
        judging the frameworks' step-0 difference."""
        result = self._probe(images, labels, lr, self.backend.dtype, valid)
        if self.backend.dtype == torch.float32:
            exact = self._probe(images, labels, lr, torch.float64, valid)
            result["fp64_loss_after_step"] = exact["loss_after_step"]
            result["fp64_grad_norm"] = exact["grad_norm"]
        return result

    def save(self, path) -> None:
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}
        atomic_stream(path, lambda handle: torch.save(state, handle))  # storage by storage, no in-memory copy

    def load(self, path) -> None:
        state = torch.load(path, map_location=self.backend.device, weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])


def _done(result):
    """`first_call_extra`'s finish for calls that already return host values (they synchronised)."""
    return result
