"""ViT-B/16's shape (torchvision.models.vit_b_16), shared by its Flax and Keras twins without either importing the
other's framework."""

from typing import NamedTuple

LN_EPS = 1e-6


class ViTConfig(NamedTuple):
    patch_size: int
    num_layers: int
    num_heads: int
    hidden_dim: int
    mlp_dim: int
    dropout: float = 0.0
    attention_dropout: float = 0.0


VIT_B_16 = ViTConfig(patch_size=16, num_layers=12, num_heads=12, hidden_dim=768, mlp_dim=3072)


def check_image_size(image_size: int, patch_size: int = VIT_B_16.patch_size) -> None:
    if image_size % patch_size:
        raise ValueError(f"vit_b_16 needs an image size divisible by {patch_size}, got {image_size}")
