"""The small CNN as a Keras twin of small_cnn_torch: same module tree names (features/0/0 = conv, features/0/1 =
batch norm, classifier) and torch's conv padding and BatchNorm semantics (fwbench.models.keras_layers)."""

from __future__ import annotations

from fwbench.models.keras_layers import (
    Dense,
    Module,
    Sequential,
    Twin,
    build_twin,
    conv_norm_activation,
    global_average_pool,
    relu,
)
from fwbench.models.small_cnn_shape import STRIDES, WIDTHS


class SmallCNN(Module):
    def __init__(self, num_classes: int):
        super().__init__("small_cnn")
        stages, cin = [], 3
        for index, (width, stride) in enumerate(zip(WIDTHS, STRIDES, strict=True)):
            stages.append(conv_norm_activation(str(index), cin, width, 3, relu, stride=stride))
            cin = width
        self.features = self.add(Sequential("features", *stages))
        self.classifier = self.add(Dense("classifier", cin, num_classes))

    def call(self, x, training=False, seed=None):
        return self.classifier(global_average_pool(self.features(x, training=training)))


def small_cnn(*, num_classes: int, image_size: int, dtype: str = "float32") -> Twin:
    del image_size  # fully convolutional up to the global pool
    return build_twin(lambda: SmallCNN(num_classes), dtype)
