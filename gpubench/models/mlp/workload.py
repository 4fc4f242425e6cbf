"""MLP forecaster: a flattened window of bar features -> the next bar's normalised return; the smallest workload, the
end-to-end smoke test."""

import torch
from torch import nn

from gpubench.data.tensors import FeatureTensors
from gpubench.models.mlp.config import MLPConfig
from gpubench.workload import ExecutionContext, StepResult, Workload


class MLPForecaster(nn.Module):
    """ReLU MLP over a flattened ``(window, n_features)`` input, predicting one value."""

    def __init__(self, window: int, n_features: int, hidden_sizes: list[int]) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = window * n_features
        for hidden in hidden_sizes:
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, windows: torch.Tensor) -> torch.Tensor:
        """``(batch, window, n_features)`` -> ``(batch,)`` predicted normalised next return."""
        return self.net(windows).squeeze(-1)


class MLPWorkload(Workload):
    """Train :class:`MLPForecaster` on random training windows of the feature tensors."""

    name = "mlp"

    @classmethod
    def check_data(cls, config: MLPConfig, data: FeatureTensors) -> None:
        data.require_window(config.window + 1, "workloads.mlp.window", config.window)

    def __init__(self, config: MLPConfig, data: FeatureTensors, context: ExecutionContext) -> None:
        self.config = config
        self.data = data
        self.context = context
        self.batch_size = context.batch_size
        # A window of `window` bars plus the bar after it, whose return is the target.
        self._train_starts = data.window_starts(config.window + 1, split="train")
        self._eval_starts = data.evaluation_starts(config.window + 1)
        self.model = MLPForecaster(config.window, data.n_features, config.hidden_sizes).to(context.device)
        # The training forward (DistributedDataParallel under distributed.nproc > 1, else the model itself).
        trained = context.parallel(self.model)
        # Fused on every device: the same operations on the CPU as on a GPU (gpubench.measure.flops).
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay, fused=True
        )
        self._forward = context.compile(trained)

    @property
    def samples_per_step(self) -> float:
        return float(self.batch_size)

    def modules(self) -> list[nn.Module]:
        return [self.model]

    def sample_batch(self, valid_starts: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(batch, window, n_features)`` inputs and ``(batch,)`` next-bar normalised returns from ``valid_starts``
        (default: training)."""
        valid_starts = self._train_starts if valid_starts is None else valid_starts
        starts = self.data.sample_starts(valid_starts, self.batch_size, self.context.generator)
        windows = self.data.gather(starts, self.config.window + 1)
        return windows[:, :-1], windows[:, -1, self.data.target_column]

    def train_step(self) -> StepResult:
        inputs, targets = self.sample_batch()
        with self.context.autocast():
            predictions = self._forward(inputs)
            loss = nn.functional.mse_loss(predictions.float(), targets)
        grad_norm = self.context.optimize(loss, self.optimizer, self.model.parameters(), self.config.max_grad_norm)
        return StepResult(loss=loss.detach(), grad_norm=grad_norm)

    def evaluate(self) -> torch.Tensor:
        """The mean squared error on one batch of validation windows, without gradients."""
        inputs, targets = self.sample_batch(self._eval_starts)
        with torch.no_grad(), self.context.autocast():
            return nn.functional.mse_loss(self.model(inputs).float(), targets)

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "window_bars": self.config.window,
            "input_features": self.data.n_features,
            "hidden_sizes": list(self.config.hidden_sizes),
        }
