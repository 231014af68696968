"""The small CNN in PyTorch, laid out like torchvision (Conv2dNormActivation = Sequential(conv, bn, act)) so that
its state_dict keys follow the same conventions as the study's torchvision models."""

from __future__ import annotations

import torch
from torch import nn

from fwbench.models.small_cnn_shape import STRIDES, WIDTHS


def _conv_bn_relu(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1),
        nn.ReLU(inplace=True),
    )


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int):
        super().__init__()
        layers, cin = [], 3
        for width, stride in zip(WIDTHS, STRIDES, strict=True):
            layers.append(_conv_bn_relu(cin, width, stride))
            cin = width
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def small_cnn(*, num_classes: int, image_size: int) -> SmallCNN:
    del image_size  # fully convolutional up to the global pool
    return SmallCNN(num_classes)
