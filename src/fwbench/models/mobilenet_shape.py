"""MobileNetV3-Small's shape: torchvision's `_mobilenet_v3_conf("mobilenet_v3_small")` at width 1.0, shared by its
Flax and Keras twins without either importing the other's framework."""

from typing import NamedTuple

BN_EPS, BN_MOMENTUM = 1e-3, 0.01
DROPOUT = 0.2


class BlockConfig(NamedTuple):
    input_channels: int
    kernel: int
    expanded_channels: int
    out_channels: int
    use_se: bool
    use_hs: bool
    stride: int


SMALL = (
    BlockConfig(16, 3, 16, 16, True, False, 2),
    BlockConfig(16, 3, 72, 24, False, False, 2),
    BlockConfig(24, 3, 88, 24, False, False, 1),
    BlockConfig(24, 5, 96, 40, True, True, 2),
    BlockConfig(40, 5, 240, 40, True, True, 1),
    BlockConfig(40, 5, 240, 40, True, True, 1),
    BlockConfig(40, 5, 120, 48, True, True, 1),
    BlockConfig(48, 5, 144, 48, True, True, 1),
    BlockConfig(48, 5, 288, 96, True, True, 2),
    BlockConfig(96, 5, 576, 96, True, True, 1),
    BlockConfig(96, 5, 576, 96, True, True, 1),
)
LAST_CHANNEL = 1024
