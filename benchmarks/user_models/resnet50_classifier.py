"""A ResNet-50 image classifier (25.6 M parameters), written as a user would, for gpubench's own validation.

Bottleneck residual blocks [3, 4, 6, 3] (He et al., 2016), 224x224 RGB images, 1,000 classes, SGD with Nesterov
momentum and weight decay, ``channels_last`` and cuDNN autotuning on (``torch.backends.cudnn.benchmark``): the
first step at a new shape tries the convolution algorithms, so it takes seconds. The images are a fixed pool of
random batches on the device. Nothing here imports gpubench.

    python -m gpubench model=custom workloads.custom.factory=resnet50_classifier:build \\
        workloads.custom.batch_size=256 workloads.custom.sample_unit=image decision.plan.samples.custom=1.28e8

``RESNET_IMAGE_SIZE`` (environment) shrinks the images for a CPU smoke test.
"""

import os

import torch
from torch import nn
from torch.nn import functional as F

IMAGE_SIZE = int(os.environ.get("RESNET_IMAGE_SIZE", "224"))
CLASSES = 1000
POOL = 4


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride), 1x1 expand by 4, each with batch norm; a projected shortcut where the
    shape changes."""

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = 4 * width
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.shortcut = None
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.shortcut is None else self.shortcut(x)))


class ResNet50(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        stages, in_channels = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for index in range(blocks):
                stages.append(Bottleneck(in_channels, width, stride if index == 0 else 1))
                in_channels = 4 * width
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(in_channels, CLASSES)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.stages(self.stem(images))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(features, 1), 1))


def build(batch_size: int, device: torch.device):
    """One SGD update of the classifier on ``batch_size`` images."""
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = ResNet50().to(device, memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    images = [
        torch.randn(batch_size, 3, IMAGE_SIZE, IMAGE_SIZE, device=device).contiguous(memory_format=torch.channels_last)
        for _ in range(POOL)
    ]
    labels = torch.randint(0, CLASSES, (POOL, batch_size), device=device)
    state = {"step": 0}

    def step() -> torch.Tensor:
        index = state["step"] % POOL
        state["step"] += 1
        loss = F.cross_entropy(model(images[index]), labels[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step
