"""Bring your own model: a sequence-to-sequence forecaster built on ``torch.nn.Transformer``, benchmarked by gpubench.

A training script as a user writes it, with nothing from gpubench in the model, the data or the training step:
noisy sine waves of random frequency, an encoder sees 96 steps, the decoder predicts the next 24 (teacher
forcing), MSE loss, AdamW, gradient clipping. The only thing gpubench needs is ``build(batch_size, device)``,
returning the function that runs one optimizer update.

From the command line, in this folder:

    python -m gpubench model=custom workloads.custom.factory=transformer_forecaster:build \\
        workloads.custom.batch_size=64 decision.plan.samples.custom=5e6

From Python (this file, run as a script; extra arguments are Hydra overrides, e.g. ``hardware=cpu
experiment=quick``):

    python transformer_forecaster.py
"""

import math
import sys

import torch
from torch import nn

ENCODER_STEPS = 96
DECODER_STEPS = 24
D_MODEL = 64
HEADS = 4
LAYERS = 2
#: One training = 100 passes over 50,000 series: 5 M series, the plan given to gpubench below.
TRAINING_SERIES = 100 * 50_000


def sine_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` noisy sine waves: the encoder's past ``(batch, 96, 1)`` and the decoder's ``(batch, 25, 1)``
    (the last past value followed by the 24 to forecast)."""
    t = torch.arange(ENCODER_STEPS + DECODER_STEPS, device=device, dtype=torch.float32)
    frequency = torch.rand(batch_size, 1, device=device) * 0.2 + 0.02
    phase = torch.rand(batch_size, 1, device=device) * 2 * math.pi
    series = torch.sin(frequency * t + phase) + 0.05 * torch.randn(batch_size, t.numel(), device=device)
    series = series.unsqueeze(-1)
    return series[:, :ENCODER_STEPS], series[:, ENCODER_STEPS - 1 :]


class Forecaster(nn.Module):
    """Project each value to ``D_MODEL``, add a learned position embedding, run ``nn.Transformer``, project back."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(1, D_MODEL)
        self.position = nn.Parameter(torch.zeros(ENCODER_STEPS + DECODER_STEPS, D_MODEL))
        self.transformer = nn.Transformer(
            d_model=D_MODEL,
            nhead=HEADS,
            num_encoder_layers=LAYERS,
            num_decoder_layers=LAYERS,
            dim_feedforward=4 * D_MODEL,
            dropout=0.1,
            batch_first=True,
        )
        self.head = nn.Linear(D_MODEL, 1)

    def forward(self, past: torch.Tensor, decoder_input: torch.Tensor) -> torch.Tensor:
        source = self.embed(past) + self.position[:ENCODER_STEPS]
        target = self.embed(decoder_input) + self.position[ENCODER_STEPS : ENCODER_STEPS + decoder_input.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(decoder_input.shape[1], device=past.device)
        return self.head(self.transformer(source, target, tgt_mask=mask, tgt_is_causal=True))


def build(batch_size: int, device: torch.device):
    """The model, optimizer and data at ``batch_size`` on ``device``; returns one training step."""
    model = Forecaster().to(device)
    # Fused: one operation on every device, so a CPU run counts what a GPU would launch (README, "Bring your own
    # model").
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01, fused=True)

    def step() -> tuple[torch.Tensor, torch.Tensor]:
        past, future = sine_batch(batch_size, device)
        prediction = model(past, future[:, :-1])
        loss = nn.functional.mse_loss(prediction, future[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        # Tensors, not .item(): reading them on the host would synchronise the GPU every step.
        return loss.detach(), grad_norm

    return step


if __name__ == "__main__":
    import gpubench

    report = gpubench.benchmark(build, batch_size=64, plan_samples=TRAINING_SERIES, overrides=sys.argv[1:])
    result = report.models["custom"]
    throughput = result.samples_per_second
    print(f"status {result.status}", f"{throughput.mean:,.0f} series/s" if throughput else result.error or "")
    recommendation = report.recommendation
    if recommendation is not None and recommendation.estimated_full_training_hours is not None:
        print(f"full training: {recommendation.estimated_full_training_hours:.2f} h -> {recommendation.decision}")
