"""ResNet-50's shape (torchvision v1.5), shared by its Flax and Keras twins without either importing the other's
framework."""

EXPANSION = 4  # Bottleneck's output width is planes * EXPANSION
BN_EPS, BN_MOMENTUM = 1e-5, 0.1
PLANES = (64, 128, 256, 512)  # layer1..layer4; layer1 keeps the stem's resolution, the others halve it
RESNET50_BLOCKS = (3, 4, 6, 3)
