"""ViT-B/16 as a Flax twin of torchvision.models.vit_b_16.

Names mirror torchvision (class_token, conv_proj, encoder/pos_embedding, encoder/layers/encoder_layer_N/ln_1,
self_attention, ln_2, mlp/0, mlp/3, encoder/ln, heads/head). nn.MultiheadAttention's packed in-projection becomes
three Dense modules in_proj_q/k/v, which the converter slices out of in_proj_weight/in_proj_bias. GELU is exact
(Flax's default is the tanh approximation) and LayerNorm uses eps 1e-6 and the two-pass variance, as torch does.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from fwbench.models.vit_shape import LN_EPS, VIT_B_16, check_image_size


def layer_norm(name: str) -> nn.LayerNorm:
    return nn.LayerNorm(epsilon=LN_EPS, use_fast_variance=False, name=name)


class SelfAttention(nn.Module):
    num_heads: int
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x, deterministic: bool):
        batch, length, dim = x.shape
        head_dim = dim // self.num_heads

        def heads(name):
            return nn.Dense(dim, name=name)(x).reshape(batch, length, self.num_heads, head_dim)

        q, k, v = heads("in_proj_q"), heads("in_proj_k"), heads("in_proj_v")
        logits = jnp.einsum("bqhd,bkhd->bhqk", q / jnp.sqrt(jnp.float32(head_dim)), k)
        weights = jax.nn.softmax(logits, axis=-1)
        weights = nn.Dropout(self.dropout)(weights, deterministic=deterministic)
        out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, length, dim)
        return nn.Dense(dim, name="out_proj")(out)


class MLP(nn.Module):
    hidden: int
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x, deterministic: bool):
        dim = x.shape[-1]
        x = nn.gelu(nn.Dense(self.hidden, name="0")(x), approximate=False)
        x = nn.Dropout(self.dropout)(x, deterministic=deterministic)
        x = nn.Dense(dim, name="3")(x)
        return nn.Dropout(self.dropout)(x, deterministic=deterministic)


class EncoderBlock(nn.Module):
    num_heads: int
    mlp_dim: int
    dropout: float = 0.0
    attention_dropout: float = 0.0

    @nn.compact
    def __call__(self, x, deterministic: bool):
        y = layer_norm("ln_1")(x)
        y = SelfAttention(self.num_heads, self.attention_dropout, name="self_attention")(y, deterministic)
        x = x + nn.Dropout(self.dropout)(y, deterministic=deterministic)
        y = MLP(self.mlp_dim, self.dropout, name="mlp")(layer_norm("ln_2")(x), deterministic)
        return x + y


class Layers(nn.Module):
    num_layers: int
    num_heads: int
    mlp_dim: int
    dropout: float

    @nn.compact
    def __call__(self, x, deterministic: bool):
        for index in range(self.num_layers):
            block = EncoderBlock(self.num_heads, self.mlp_dim, self.dropout, name=f"encoder_layer_{index}")
            x = block(x, deterministic)
        return x


class Encoder(nn.Module):
    seq_length: int
    num_layers: int
    num_heads: int
    mlp_dim: int
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x, deterministic: bool):
        pos = self.param("pos_embedding", nn.initializers.normal(0.02), (1, self.seq_length, x.shape[-1]))
        x = nn.Dropout(self.dropout)(x + pos, deterministic=deterministic)
        x = Layers(self.num_layers, self.num_heads, self.mlp_dim, self.dropout, name="layers")(x, deterministic)
        return layer_norm("ln")(x)


class Heads(nn.Module):
    num_classes: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.num_classes, name="head")(x)


class VisionTransformer(nn.Module):
    image_size: int
    patch_size: int
    num_layers: int
    num_heads: int
    hidden_dim: int
    mlp_dim: int
    num_classes: int
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x, train: bool = False, deterministic: bool | None = None):
        deterministic = not train if deterministic is None else deterministic
        if x.shape[1] != self.image_size or x.shape[2] != self.image_size:
            raise ValueError(f"ViT expects {self.image_size}x{self.image_size} inputs, got {x.shape[1:3]}")
        p = self.patch_size
        x = nn.Conv(self.hidden_dim, (p, p), strides=p, padding=((0, 0), (0, 0)), name="conv_proj")(x)
        batch = x.shape[0]
        x = x.reshape(batch, -1, self.hidden_dim)  # row-major over the patch grid, as torch's flatten(2)
        class_token = self.param("class_token", nn.initializers.zeros, (1, 1, self.hidden_dim))
        x = jnp.concatenate([jnp.broadcast_to(class_token, (batch, 1, self.hidden_dim)), x], axis=1)
        seq_length = (self.image_size // p) ** 2 + 1
        x = Encoder(seq_length, self.num_layers, self.num_heads, self.mlp_dim, self.dropout, name="encoder")(
            x, deterministic
        )
        return Heads(self.num_classes, name="heads")(x[:, 0])


def vit_b_16(*, num_classes: int, image_size: int) -> VisionTransformer:
    check_image_size(image_size)
    c = VIT_B_16
    return VisionTransformer(image_size, c.patch_size, c.num_layers, c.num_heads, c.hidden_dim, c.mlp_dim, num_classes)
