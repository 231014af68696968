"""ViT-B/16 as a Keras twin of torchvision.models.vit_b_16.

Names mirror torchvision (class_token, conv_proj, encoder/pos_embedding, encoder/layers/encoder_layer_N/ln_1,
self_attention, ln_2, mlp/0, mlp/3, encoder/ln, heads/head). nn.MultiheadAttention's packed in-projection becomes
three Dense modules in_proj_q/k/v, which the shared converter slices out of in_proj_weight/in_proj_bias. GELU is
exact and LayerNorm uses eps 1e-6 and the two-pass variance, as torch does.
"""

from __future__ import annotations

import math

from fwbench.models.keras_layers import (
    Conv2d,
    Dense,
    Dropout,
    LayerNorm,
    Module,
    Sequential,
    Twin,
    build_twin,
    gelu,
    normal_init,
)
from fwbench.models.tensorflow_import import tf
from fwbench.models.vit_shape import LN_EPS, VIT_B_16, ViTConfig, check_image_size


class SelfAttention(Module):
    """nn.MultiheadAttention(batch_first=True) on (x, x, x), without attention weights."""

    def __init__(self, name: str, dim: int, num_heads: int, dropout: float):
        super().__init__(name)
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.in_proj_q = self.add(Dense("in_proj_q", dim, dim))
        self.in_proj_k = self.add(Dense("in_proj_k", dim, dim))
        self.in_proj_v = self.add(Dense("in_proj_v", dim, dim))
        self.out_proj = self.add(Dense("out_proj", dim, dim))
        self.dropout = self.add(Dropout("dropout", dropout))

    def call(self, x, training=False, seed=None):
        batch, length, dim = tf.shape(x)[0], x.shape[1], x.shape[2]

        def heads(projection):
            return tf.reshape(projection(x), (batch, length, self.num_heads, self.head_dim))

        q = heads(self.in_proj_q) / math.sqrt(self.head_dim)
        logits = tf.einsum("bqhd,bkhd->bhqk", q, heads(self.in_proj_k))
        weights = self.dropout(tf.nn.softmax(logits, axis=-1), training=training, seed=seed)
        out = tf.einsum("bhqk,bkhd->bqhd", weights, heads(self.in_proj_v))
        return self.out_proj(tf.reshape(out, (batch, length, dim)))


class EncoderBlock(Module):
    def __init__(self, name: str, config: ViTConfig):
        super().__init__(name)
        dim = config.hidden_dim
        self.ln_1 = self.add(LayerNorm("ln_1", dim, eps=LN_EPS))
        self.self_attention = self.add(SelfAttention("self_attention", dim, config.num_heads, config.attention_dropout))
        self.dropout = self.add(Dropout("dropout", config.dropout))
        self.ln_2 = self.add(LayerNorm("ln_2", dim, eps=LN_EPS))
        self.mlp = self.add(
            Sequential(
                "mlp",
                Dense("0", dim, config.mlp_dim),
                gelu,
                Dropout("2", config.dropout),
                Dense("3", config.mlp_dim, dim),
                Dropout("4", config.dropout),
            )
        )

    def call(self, x, training=False, seed=None):
        y = self.self_attention(self.ln_1(x), training=training, seed=seed)
        x = x + self.dropout(y, training=training, seed=seed)
        return x + self.mlp(self.ln_2(x), training=training, seed=seed)


class Encoder(Module):
    def __init__(self, name: str, seq_length: int, config: ViTConfig):
        super().__init__(name)
        shape = (1, seq_length, config.hidden_dim)
        self.pos_embedding = self.variable("pos_embedding", shape, normal_init(0.02))
        self.dropout = self.add(Dropout("dropout", config.dropout))
        blocks = [EncoderBlock(f"encoder_layer_{i}", config) for i in range(config.num_layers)]
        self.layers_ = self.add(Sequential("layers", *blocks))
        self.ln = self.add(LayerNorm("ln", config.hidden_dim, eps=LN_EPS))

    def call(self, x, training=False, seed=None):
        x = self.dropout(x + self.pos_embedding, training=training, seed=seed)
        return self.ln(self.layers_(x, training=training, seed=seed))


class VisionTransformer(Module):
    def __init__(self, image_size: int, config: ViTConfig, num_classes: int):
        super().__init__("vit_b_16")
        check_image_size(image_size, config.patch_size)
        self.image_size, self.hidden_dim = image_size, config.hidden_dim
        p = config.patch_size
        self.conv_proj = self.add(Conv2d("conv_proj", 3, config.hidden_dim, p, stride=p, padding=0, bias=True))
        self.class_token = self.variable("class_token", (1, 1, config.hidden_dim), "zeros")
        self.encoder = self.add(Encoder("encoder", (image_size // p) ** 2 + 1, config))
        self.heads = self.add(Sequential("heads", Dense("head", config.hidden_dim, num_classes)))

    def call(self, x, training=False, seed=None):
        if x.shape[1] != self.image_size or x.shape[2] != self.image_size:
            raise ValueError(f"ViT expects {self.image_size}x{self.image_size} inputs, got {tuple(x.shape[1:3])}")
        x = self.conv_proj(x)
        batch = tf.shape(x)[0]
        x = tf.reshape(x, (batch, -1, self.hidden_dim))  # row-major over the patch grid, as torch's flatten(2)
        token = tf.broadcast_to(self.class_token, (batch, 1, self.hidden_dim))
        x = self.encoder(tf.concat([token, x], axis=1), training=training, seed=seed)
        return self.heads(x[:, 0])


def vit_b_16(*, num_classes: int, image_size: int, dtype: str = "float32") -> Twin:
    return build_twin(lambda: VisionTransformer(image_size, VIT_B_16, num_classes), dtype)
