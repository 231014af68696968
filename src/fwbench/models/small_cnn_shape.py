"""The small CNN's shape, shared by its PyTorch and Flax twins without either importing the other's framework (a
JAX measuring process must not load PyTorch: its import time and memory would count against JAX)."""

WIDTHS = (32, 64, 128)
STRIDES = (1, 2, 2)
