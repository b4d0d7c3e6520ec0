"""The small models the course trains: an MLP and a 1-D CNN for MNIST-1D, the report's CNN.

They are deliberately small: on MNIST-1D a step costs well under a millisecond on one
core, so the cost of an update is dominated by how many samples it sees, which is what
the batch-size experiments are about. `build` makes one by name, seeded, so a run can be
repeated exactly and every rank starts from the same weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """Flattened input, two hidden ReLU layers of `hidden` units, one logit per class."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 128):
        super().__init__()
        inputs = math.prod(input_shape)
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(inputs, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CNN1D(nn.Module):
    """Three 1-D convolutions over the signal, then a linear read-out (about 90% on MNIST-1D)."""

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 32):
        super().__init__()
        (length,) = input_shape
        self.features = nn.Sequential(
            nn.Conv1d(1, hidden, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(hidden, hidden, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv1d(hidden, hidden, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        reduced = (length + 3) // 4
        self.head = nn.Linear(hidden * reduced, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x.unsqueeze(1)).flatten(1))


class ReportCNN(nn.Module):
    """The report's CIFAR-10 network: two 5x5 convolutions with pooling, three linear layers."""

    def __init__(self, input_shape: tuple[int, ...] = (3, 32, 32), num_classes: int = 10, hidden=0):
        super().__init__()
        channels, height, width = input_shape
        self.features = nn.Sequential(
            nn.Conv2d(channels, 6, 5),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        side = ((height - 4) // 2 - 4) // 2, ((width - 4) // 2 - 4) // 2
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * side[0] * side[1], 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
            nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


MODELS = {"mlp": MLP, "cnn1d": CNN1D, "report_cnn": ReportCNN}


def build(
    name: str,
    input_shape: tuple[int, ...],
    num_classes: int,
    hidden: int | None = None,
    seed: int | None = 0,
) -> nn.Module:
    """The model called `name`, initialised from `seed` without touching the global RNG.

    The same seed gives the same weights in every process, which is what lets a rank's
    replica, a serial twin and a repeated run start from one point.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}.")
    if hidden is not None and (not isinstance(hidden, int) or hidden < 1):
        raise ValueError(f"hidden must be a positive whole number of units, got {hidden!r}.")
    kwargs = {} if hidden is None else {"hidden": hidden}
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        return MODELS[name](tuple(input_shape), num_classes, **kwargs)


@torch.no_grad()
def evaluate(model, x: torch.Tensor, y: torch.Tensor, chunk: int = 4096) -> tuple[float, float]:
    """(mean cross-entropy, accuracy) of `model` on all of x, y, in eval mode, `chunk` samples
    at a time on the model's device."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    loss, correct = 0.0, 0
    for i in range(0, len(y), chunk):
        xs, ys = x[i : i + chunk].to(device), y[i : i + chunk].to(device)
        out = model(xs)
        loss += float(F.cross_entropy(out, ys, reduction="sum"))
        correct += int((out.argmax(1) == ys).sum())
    model.train(was_training)
    return loss / len(y), correct / len(y)
