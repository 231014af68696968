"""Channel rounding of torchvision's MobileNet/EfficientNet family, framework-free so that every framework's twin
shares it without importing another framework (fwbench.models.layers re-exports it for the Flax twins)."""


def make_divisible(value: float, divisor: int = 8, min_value: int | None = None) -> int:
    """torchvision.models._utils._make_divisible, copied so the twins never import torch."""
    min_value = divisor if min_value is None else min_value
    rounded = max(min_value, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded
