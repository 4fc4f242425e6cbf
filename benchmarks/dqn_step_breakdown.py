"""Where an eager DQN step's time goes, against the floor set by one eager Adam step of the same Q-network.

Issue 4 asks DQN for 3x Stable-Baselines3's 276 gradient steps/s in eager mode on the H200: 1.21 ms for a whole
step (one vectorised environment step, its replay writes, one gradient step). On a GPU these networks are
launch-bound: the step's time is the host's time to dispatch its kernels, not the kernels'. This script times, with
the device synchronised only at block edges:

* the host's cost of one bare kernel launch (``add_`` on a one-element tensor);
* one supervised Adam step of the DQN Q-network on a fixed batch (forward, Huber loss, backward, optimizer step),
  with torch's default Adam (``foreach``) as in the issue's "tiny MLP Adam step", with ``fused=True``, and fused
  with gradient-norm clipping, which is the optimizer recipe the DQN gradient step runs;
* the pieces of that step alone (``zero_grad`` + backward, ``clip_grad_norm_``, ``Adam.step``);
* the DQN workload's own pieces: :meth:`DQNWorkload.collect` (ε-greedy action, environment step, replay write),
  :meth:`DQNWorkload.gradient_step` (replay sample, online and target forwards, Double DQN target, backward,
  clipping, Adam) and the whole ``train_step``.

Each row also counts the tensor operations it dispatches (:class:`~gpubench.workload.OpCounter`). A DQN gradient
step contains a supervised Adam step plus two more forward passes and the replay sample, so the supervised step's
time is a floor under the DQN step's in eager mode. Run ``python benchmarks/dqn_step_breakdown.py``.
"""

import torch
import torch.nn.functional as F
from _features import random_features
from _timing import time_per_step
from models_rl import N_FEATURES, SB3_DQN_GRADIENT_STEPS_PER_S

from gpubench.models.dqn.config import DQNConfig
from gpubench.models.dqn.workload import DQNWorkload, QNetwork
from gpubench.workload import ExecutionContext, OpCounter

#: Eager goal of issue 4: three times SB3's gradient steps/s, as milliseconds per step.
GOAL_MS = 1e3 / (3 * SB3_DQN_GRADIENT_STEPS_PER_S)
BATCH_SIZE = 256


def supervised_step(network: QNetwork, optimizer: torch.optim.Optimizer, clip: float | None, device: torch.device):
    """One Adam step of ``network`` on a fixed random batch with a Huber loss, as a zero-argument callable."""
    observations = torch.randn(BATCH_SIZE, network.hidden[0].in_features, device=device)
    targets = torch.randn(BATCH_SIZE, network.head.out_features, device=device)
    parameters = list(network.parameters())

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        F.huber_loss(network(observations), targets).backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(parameters, clip, foreach=True)
        optimizer.step()

    return step


def optimizer_pieces(network: QNetwork, device: torch.device) -> dict[str, object]:
    """The optimizer recipe's pieces alone, on gradients that already exist."""
    observations = torch.randn(BATCH_SIZE, network.hidden[0].in_features, device=device)
    parameters = list(network.parameters())
    optimizer = torch.optim.Adam(parameters, lr=1e-4, fused=True)

    def backward() -> None:
        optimizer.zero_grad(set_to_none=True)
        network(observations).square().mean().backward()

    backward()
    return {
        "forward only (3 linear layers, no grad)": lambda: _no_grad_forward(network, observations),
        "zero_grad + forward + backward": backward,
        "clip_grad_norm_ (foreach)": lambda: torch.nn.utils.clip_grad_norm_(parameters, 10.0, foreach=True),
        "Adam.step (fused)": optimizer.step,
    }


def _no_grad_forward(network: QNetwork, observations: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return network(observations)


def ops_per_call(function, calls: int = 3) -> float:
    with OpCounter() as ops:
        for _ in range(calls):
            function()
    return ops.count / calls


def main() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    full = device.type == "cuda"
    steps_per_block, blocks = (200, 7) if full else (20, 3)
    data = random_features(device, n_symbols=4, bars_per_symbol=20 * 390, n_observed=N_FEATURES)
    # One gradient step per DQN step (the recipe's default bundles 16 per vectorised env step): the breakdown
    # compares one collect + one gradient step against SB3's gradient steps per second.
    config = DQNConfig(gradient_steps=1)
    workload = DQNWorkload(config, data, ExecutionContext(device=device, batch_size=BATCH_SIZE))
    observation_size = workload.env.observation_size

    def fresh_network() -> QNetwork:
        return QNetwork(observation_size, config.hidden_sizes).to(device)

    one = torch.zeros(1, device=device)
    rows: dict[str, object] = {"bare kernel launch (add_ on one element)": lambda: one.add_(1.0)}
    network = fresh_network()
    rows["supervised Adam step, torch defaults (foreach)"] = supervised_step(
        network, torch.optim.Adam(network.parameters(), lr=1e-4), None, device
    )
    network = fresh_network()
    rows["supervised Adam step, fused"] = supervised_step(
        network, torch.optim.Adam(network.parameters(), lr=1e-4, fused=True), None, device
    )
    network = fresh_network()
    rows["supervised Adam step, fused + clip 10 (DQN's recipe)"] = supervised_step(
        network, torch.optim.Adam(network.parameters(), lr=1e-4, fused=True), config.max_grad_norm, device
    )
    rows.update(optimizer_pieces(fresh_network(), device))
    rows["DQN collect: action, env step, replay write"] = workload.collect
    rows["DQN gradient_step: sample, 3 forwards, target, loss, optimize"] = workload.gradient_step
    rows["DQN train_step (collect + gradient_step + counters)"] = workload.train_step

    name = torch.cuda.get_device_name(device) if full else "CPU"
    print(f"DQN eager step breakdown on {name}, torch {torch.__version__}; Q-network {observation_size}-256-256-3,")
    print(f"batch {BATCH_SIZE}, {config.env.num_envs} envs; median of {blocks} blocks of {steps_per_block} calls")
    print(f"eager goal (3x SB3's {SB3_DQN_GRADIENT_STEPS_PER_S:g} gradient steps/s): {GOAL_MS:.3f} ms per DQN step")
    print(f"{'ms/call':>9} {'min':>7} {'max':>7} {'ops':>5}  piece")
    for label, function in rows.items():
        timing = time_per_step(function, device, warmup_steps=20, steps_per_block=steps_per_block, blocks=blocks)
        ops = ops_per_call(function)
        print(f"{timing.median_ms:>9.3f} {timing.min_ms:>7.3f} {timing.max_ms:>7.3f} {ops:>5.0f}  {label}")


if __name__ == "__main__":
    main()
