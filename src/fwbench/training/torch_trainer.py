"""PyTorch trainer: eager train mode, torch.optim.Adam with the step's learning rate set from the shared schedule."""

from __future__ import annotations

import copy
import io
from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from fwbench.backends.base import STATISTICS, Trainer
from fwbench.io import atomic_write_bytes
from fwbench.models import torch_model
from fwbench.training.recipe import Recipe


def adam(parameters, recipe: Recipe) -> torch.optim.Adam:
    # foreach=False: the reference single-tensor implementation, whose arithmetic order optax's matches.
    return torch.optim.Adam(
        parameters, lr=recipe.lr, betas=recipe.betas, eps=recipe.eps, weight_decay=recipe.weight_decay, foreach=False
    )


def _is_statistic(key: str) -> bool:
    return "running" in key or "num_batches" in key


def _randomness_off(model: torch.nn.Module) -> None:
    """Train mode (batch statistics) with dropout and stochastic depth off, as the JAX probe runs."""
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) or type(module).__name__ == "StochasticDepth":
            module.eval()


class TorchTrainer(Trainer):
    def __init__(self, backend, model: str, state_dict: Mapping[str, np.ndarray], *, num_classes, image_size, recipe):
        self.backend, self.recipe = backend, recipe
        module = torch_model(model, num_classes=num_classes, image_size=image_size)
        module.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in state_dict.items()}, strict=True)
        self.model = module.to(device=backend.device, dtype=backend.dtype).train()
        self.optimizer = adam(self.model.parameters(), recipe)
        self.recalibrated: dict[str, torch.Tensor] | None = None

    def to_device(self, images_nhwc, labels):
        nchw = np.ascontiguousarray(np.asarray(images_nhwc, np.float32).transpose(0, 3, 1, 2))
        images = torch.from_numpy(nchw).to(device=self.backend.device, dtype=self.backend.dtype)
        return images, torch.from_numpy(np.asarray(labels, np.int64)).to(self.backend.device)

    def synchronize(self, handle) -> None:
        if self.backend.device.type == "cuda":
            torch.cuda.synchronize(self.backend.device)

    def compile(self, images, labels) -> None:
        return None

    def _seed(self, step_index: int) -> None:
        # Dropout masks depend only on (seed, step), so a run resumed at an epoch boundary draws what it would have.
        torch.manual_seed(self.recipe.seed * 1_000_003 + step_index)

    def step(self, images, labels, lr: float, step_index: int):
        self._seed(step_index)
        for group in self.optimizer.param_groups:
            group["lr"] = float(lr)
        self.optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.model(images).float(), labels)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

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
                logits = self.model(images).float()[:valid]
                loss = F.cross_entropy(logits, labels[:valid], reduction="sum")
                top = logits.topk(min(5, logits.shape[-1]), dim=1).indices
                hit1 = (top[:, 0] == labels[:valid]).sum()
                hit5 = (top == labels[:valid, None]).any(dim=1).sum()
                return float(loss.item()), int(hit1.item()), int(hit5.item())
        finally:
            self.model.train()
            if saved is not None:
                self.model.load_state_dict(saved, strict=False)

    def recalibrate(self, batches) -> bool:
        norms = [m for m in self.model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
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
                    self.model(images)
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

    def _probe(self, images, labels, lr: float, dtype) -> dict[str, float]:
        model = copy.deepcopy(self.model).to(dtype)
        _randomness_off(model)
        optimizer = adam(model.parameters(), self.recipe)
        for group in optimizer.param_groups:
            group["lr"] = float(lr)
        images = images.to(dtype)
        loss = F.cross_entropy(model(images).to(torch.promote_types(dtype, torch.float32)), labels)
        loss.backward()
        grads = [p.grad.double().flatten() for p in model.parameters() if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.cat(grads)).item())
        optimizer.step()
        with torch.no_grad():
            after = F.cross_entropy(model(images).to(torch.promote_types(dtype, torch.float32)), labels)
        return {"loss": float(loss.item()), "grad_norm": norm, "loss_after_step": float(after.item())}

    def probe(self, images, labels, lr: float) -> dict[str, float]:
        """Also, in fp32 cells, the same probe in float64: how far PyTorch's own fp32 result is from the exact one
        (Adam's first step is sign-like, so ill-conditioned gradients can make this large), the yardstick for
        judging the frameworks' step-0 difference."""
        result = self._probe(images, labels, lr, self.backend.dtype)
        if self.backend.dtype == torch.float32:
            exact = self._probe(images, labels, lr, torch.float64)
            result["fp64_loss_after_step"] = exact["loss_after_step"]
            result["fp64_grad_norm"] = exact["grad_norm"]
        return result

    def save(self, path) -> None:
        buffer = io.BytesIO()
        torch.save({"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}, buffer)
        atomic_write_bytes(path, buffer.getvalue())

    def load(self, path) -> None:
        state = torch.load(path, map_location=self.backend.device, weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
