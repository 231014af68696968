"""EfficientNet-B0's shape (torchvision.models.efficientnet_b0), shared by its Flax and Keras twins without either
importing the other's framework."""

from typing import NamedTuple

BN_EPS, BN_MOMENTUM = 1e-5, 0.1
DROPOUT = 0.2
STOCHASTIC_DEPTH_PROB = 0.2  # reached by the last block, growing linearly from 0 over the blocks


class StageConfig(NamedTuple):
    expand_ratio: int
    kernel: int
    stride: int
    input_channels: int
    out_channels: int
    num_layers: int


B0 = (
    StageConfig(1, 3, 1, 32, 16, 1),
    StageConfig(6, 3, 2, 16, 24, 2),
    StageConfig(6, 5, 2, 24, 40, 2),
    StageConfig(6, 3, 2, 40, 80, 3),
    StageConfig(6, 5, 1, 80, 112, 3),
    StageConfig(6, 5, 2, 112, 192, 4),
    StageConfig(6, 3, 1, 192, 320, 1),
)


def stochastic_depth_rate(block_id: int, total_blocks: int, prob: float = STOCHASTIC_DEPTH_PROB) -> float:
    """torchvision's `sd_prob = stochastic_depth_prob * float(stage_block_id) / total_stage_blocks`."""
    return prob * float(block_id) / total_blocks
