"""Bring your own model: a small convolutional image classifier in plain PyTorch, written as a training class.

The user's script has a ``Trainer`` that owns the network, the optimizer and a synthetic dataset (28×28 images
of ten blurred stripe patterns, in place of a real dataset loaded to the device); calling it runs one optimizer
update. ``build`` returns a ``Trainer``: gpubench calls it as the step, and counts the parameters of the network it
holds. A step here consumes ``batch_size`` images, so the plan is in images.

    python -m gpubench model=custom workloads.custom.factory=cnn_classifier:build \\
        workloads.custom.batch_size=128 workloads.custom.sample_unit=image decision.plan.samples.custom=6e6

    python cnn_classifier.py hardware=cpu experiment=quick      # the Python API; arguments are Hydra overrides
"""

import sys

import torch
from torch import nn

CLASSES = 10
DATASET_IMAGES = 60_000
#: 100 epochs over a 60,000-image dataset.
TRAINING_IMAGES = 100 * DATASET_IMAGES


def stripe_images(count: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` noisy 1×28×28 images whose class sets the stripes' angle and frequency, and their labels."""
    labels = torch.randint(0, CLASSES, (count,), generator=generator)
    grid = torch.linspace(-1, 1, 28)
    y, x = torch.meshgrid(grid, grid, indexing="ij")
    angle = labels.float()[:, None, None] * (torch.pi / CLASSES)
    frequency = 2.0 + labels.float()[:, None, None] % 3
    images = torch.sin(frequency * torch.pi * (x * torch.cos(angle) + y * torch.sin(angle)))
    images = images + 0.3 * torch.randn(count, 28, 28, generator=generator)
    return images.unsqueeze(1), labels


class Trainer:
    """A LeNet-style network trained with SGD + momentum on batches drawn from an in-memory dataset."""

    def __init__(self, batch_size: int, device: torch.device, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        images, labels = stripe_images(DATASET_IMAGES // 10, generator)
        self.images, self.labels = images.to(device), labels.to(device)
        self.batch_size = batch_size
        self.network = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, 128),
            nn.ReLU(),
            nn.Linear(128, CLASSES),
        ).to(device)
        self.optimizer = torch.optim.SGD(self.network.parameters(), lr=0.05, momentum=0.9)

    def __call__(self) -> torch.Tensor:
        rows = torch.randint(0, len(self.images), (self.batch_size,), device=self.images.device)
        loss = nn.functional.cross_entropy(self.network(self.images[rows]), self.labels[rows])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def build(batch_size: int, device: torch.device) -> Trainer:
    return Trainer(batch_size, device)


if __name__ == "__main__":
    import gpubench

    report = gpubench.benchmark(
        build, batch_size=128, sample_unit="image", plan_samples=TRAINING_IMAGES, overrides=sys.argv[1:]
    )
    result = report.models["custom"]
    throughput = result.samples_per_second
    print(f"status {result.status}", f"{throughput.mean:,.0f} images/s" if throughput else result.error or "")
    recommendation = report.recommendation
    if recommendation is not None and recommendation.estimated_full_training_hours is not None:
        print(f"full training: {recommendation.estimated_full_training_hours:.2f} h -> {recommendation.decision}")
