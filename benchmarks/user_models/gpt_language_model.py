"""A GPT-2-small language model (124 M parameters), written as a user would, for gpubench's own validation.

A GPU-bound training: 12 blocks of causal self-attention (``scaled_dot_product_attention``) and a GELU MLP, width
768, 12 heads, context 512, tied input and output embeddings, bf16 autocast, fused AdamW, gradient clipping.
The tokens are a fixed pool of random batches made once on the device (the data pipeline is not what is timed).
Nothing here imports gpubench: ``build(batch_size, device)`` returns the function that runs one optimizer update.

    python -m gpubench model=custom workloads.custom.factory=gpt_language_model:build \\
        workloads.custom.batch_size=16 workloads.custom.samples_per_step=8192 workloads.custom.sample_unit=token \\
        decision.plan.samples.custom=2e9       # (from this folder; 16 sequences x 512 tokens a step)

``GPT_LM_LAYERS``/``GPT_LM_WIDTH``/``GPT_LM_CONTEXT`` (environment) shrink it for a CPU smoke test.
"""

import math
import os

import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 50_304
LAYERS = int(os.environ.get("GPT_LM_LAYERS", "12"))
WIDTH = int(os.environ.get("GPT_LM_WIDTH", "768"))
HEADS = 12 if WIDTH % 12 == 0 else 4
CONTEXT = int(os.environ.get("GPT_LM_CONTEXT", "512"))
#: Distinct batches kept on the device and cycled through.
POOL = 8


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention, then a 4x GELU MLP, each added to the residual."""

    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.norm2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, steps, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(WIDTH, dim=2)
        q, k, v = (t.view(batch, steps, HEADS, WIDTH // HEADS).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, steps, WIDTH))
        return x + self.mlp(self.norm2(x))


class LanguageModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, WIDTH)
        self.positions = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(WIDTH)
        for parameter in self.parameters():
            if parameter.dim() >= 2:
                nn.init.normal_(parameter, std=0.02 / math.sqrt(2 * LAYERS) if parameter.shape[0] == WIDTH else 0.02)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tokens(tokens) + self.positions(positions)
        for block in self.blocks:
            x = block(x)
        # Tied embeddings: the output head is the input embedding's transpose.
        return self.norm(x) @ self.tokens.weight.t()


def build(batch_size: int, device: torch.device):
    """One optimizer update of next-token prediction on ``batch_size`` sequences of ``CONTEXT`` tokens."""
    torch.manual_seed(0)
    model = LanguageModel().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=device.type == "cuda")
    pool = torch.randint(0, VOCAB, (POOL, batch_size, CONTEXT + 1), device=device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    state = {"step": 0}

    def step() -> torch.Tensor:
        batch = pool[state["step"] % POOL]
        state["step"] += 1
        with autocast:
            logits = model(batch[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB).float(), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.detach()

    return step
