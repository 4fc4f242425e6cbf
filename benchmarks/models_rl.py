"""DQN and PPO training-step speed in every execution mode, against the Stable-Baselines3 anchors of issue 4.

Anchors, measured on the NVIDIA H200 on 2026-11-29 with 256-256 networks: SB3 PPO (CartPole, 8 envs, n_steps 256,
batch 256, 4 epochs) 4,209 env steps/s; SB3 DQN (batch 256, train_freq 1) 276 gradient steps/s. Goals: PPO at
least 10x SB3's env steps/s; DQN at least 3x SB3's gradient steps/s eager and 10x with CUDA graphs
(``execution.compile=reduce-overhead``). When ``stable_baselines3`` and ``gymnasium`` are installed, SB3 is also
timed live in the same run, on the same device.

Each row times one workload step (DQN: one vectorised env step + its gradient step; PPO: one minibatch update, the
rollout counted in the iteration it feeds) with the device synchronised only at block edges. PPO blocks are whole
iterations, so every block contains the same number of rollouts. Eager rows also count the tensor operations a step
dispatches (:class:`~gpubench.workload.OpCounter`; PPO's per update, over a whole iteration): these steps are
launch-bound on a GPU, so the count explains the eager time. On CUDA the workloads run at their default
configurations plus one case shaped like the SB3 anchor; on the CPU small shapes, so the script finishes in a few
minutes (most of it compilation). Run ``python benchmarks/models_rl.py``.
"""

import time

import torch
from _features import random_features
from _timing import time_per_step

from gpubench.data.tensors import FeatureTensors
from gpubench.models.dqn.config import DQNConfig
from gpubench.models.dqn.workload import DQNWorkload
from gpubench.models.ppo.config import PPOConfig
from gpubench.models.ppo.workload import PPOWorkload
from gpubench.models.trading_env.config import TradingEnvConfig
from gpubench.workload import ExecutionContext, OpCounter, Workload

#: Stable-Baselines3 PPO on CartPole (8 envs, n_steps 256, batch 256, 4 epochs, 256-256), H200, 2026-11-29.
SB3_PPO_ENV_STEPS_PER_S = 4209.0
#: Stable-Baselines3 DQN (batch 256, train_freq 1, 256-256), H200, 2026-11-29.
SB3_DQN_GRADIENT_STEPS_PER_S = 276.0
COMPILE_MODES = ("false", "true", "reduce-overhead")
#: Columns of the real feature pipeline (returns, range, body, volume, volatility, 4 calendar columns).
N_FEATURES = 9


def _time_ms(workload: Workload, device: torch.device, steps_per_block: int, blocks: int) -> float:
    # The warm-up covers compilation and CUDA-graph capture, which happen on the first calls.
    timing = time_per_step(
        workload.train_step, device, warmup_steps=steps_per_block, steps_per_block=steps_per_block, blocks=blocks
    )
    return timing.median_ms


def _ops_note(workload: Workload, steps: int, mode: str) -> str:
    """``"; N tensor ops/step"`` counted over ``steps`` steps in eager mode (compiled code bypasses the count)."""
    if mode != "false":
        return ""
    with OpCounter() as ops:
        for _ in range(steps):
            workload.train_step()
    return f"; {ops.count / steps:,.0f} tensor ops/step"


def dqn_row(case: str, config: DQNConfig, batch_size: int, data: FeatureTensors, mode: str, full: bool) -> dict:
    """Time DQN in ``mode``; the throughput is gradient steps/s, compared with SB3's."""
    context = ExecutionContext(device=data.device, batch_size=batch_size, compile_mode=mode)
    workload = DQNWorkload(config, data, context)
    ms = _time_ms(workload, data.device, steps_per_block=50 if full else 10, blocks=5 if full else 3)
    gradient_steps_per_s = config.gradient_steps * 1e3 / ms
    execution = workload.describe()["execution"]
    return {
        "model": "dqn",
        "case": f"{case}; {execution}",
        "ms_per_step": ms,
        "reference_ms": config.gradient_steps * 1e3 / SB3_DQN_GRADIENT_STEPS_PER_S,
        "notes": (
            f"{gradient_steps_per_s:,.0f} gradient steps/s = {gradient_steps_per_s / SB3_DQN_GRADIENT_STEPS_PER_S:.1f}x"
            f" SB3's {SB3_DQN_GRADIENT_STEPS_PER_S:,.0f} (goal 3x eager, 10x CUDA graph); "
            f"{workload.samples_per_step * 1e3 / ms:,.0f} env steps/s{_ops_note(workload, 1, mode)}"
        ),
    }


def ppo_row(case: str, config: PPOConfig, batch_size: int, data: FeatureTensors, mode: str, full: bool) -> dict:
    """Time PPO in ``mode`` over whole iterations; the throughput is env steps/s, compared with SB3's."""
    context = ExecutionContext(device=data.device, batch_size=batch_size, compile_mode=mode)
    workload = PPOWorkload(config, data, context)
    iterations_per_block = 2 if full else 1
    ms = _time_ms(workload, data.device, workload.updates_per_iteration * iterations_per_block, 5 if full else 3)
    env_steps_per_s = workload.samples_per_step * 1e3 / ms
    execution = workload.describe()["execution"]
    return {
        "model": "ppo",
        "case": f"{case}; {execution}",
        "ms_per_step": ms,
        "reference_ms": workload.samples_per_step * 1e3 / SB3_PPO_ENV_STEPS_PER_S,
        "notes": (
            f"{env_steps_per_s:,.0f} env steps/s = {env_steps_per_s / SB3_PPO_ENV_STEPS_PER_S:.1f}x SB3's "
            f"{SB3_PPO_ENV_STEPS_PER_S:,.0f} (goal 10x); {1e3 / ms:,.0f} minibatch updates/s"
            f"{_ops_note(workload, workload.updates_per_iteration, mode)}"
        ),
    }


def sb3_rows(device: torch.device, full: bool) -> list[dict]:
    """SB3 PPO and DQN timed live on CartPole with the anchor's settings, when SB3 and gymnasium are installed."""
    try:
        import gymnasium  # noqa: F401  (SB3's environments need it; its absence means no live comparison)
        from stable_baselines3 import DQN, PPO
        from stable_baselines3.common.env_util import make_vec_env
    except ImportError:
        return []
    net = {"net_arch": [256, 256]}
    ppo = PPO(
        "MlpPolicy",
        make_vec_env("CartPole-v1", n_envs=8, seed=0),
        n_steps=256,
        batch_size=256,
        n_epochs=4,
        policy_kwargs=net,
        device=device,
        seed=0,
    )
    iteration_env_steps = 8 * 256
    updates_per_iteration = 4 * iteration_env_steps // 256
    ppo.learn(iteration_env_steps)
    iterations = 10 if full else 2
    start = time.perf_counter()
    ppo.learn(iterations * iteration_env_steps, reset_num_timesteps=False)
    ppo_seconds = time.perf_counter() - start
    dqn = DQN(
        "MlpPolicy",
        "CartPole-v1",
        batch_size=256,
        train_freq=1,
        gradient_steps=1,
        learning_starts=1000,
        policy_kwargs=net,
        device=device,
        seed=0,
    )
    dqn.learn(1100)
    gradient_steps = 2000 if full else 200
    start = time.perf_counter()
    dqn.learn(gradient_steps, reset_num_timesteps=False)
    dqn_seconds = time.perf_counter() - start
    ppo_env_steps_per_s = iterations * iteration_env_steps / ppo_seconds
    return [
        {
            "model": "ppo",
            "case": "Stable-Baselines3 PPO, CartPole, 8 envs x 256 steps, batch 256, 4 epochs (live)",
            "ms_per_step": ppo_seconds * 1e3 / (iterations * updates_per_iteration),
            "reference_ms": None,
            "notes": f"{ppo_env_steps_per_s:,.0f} env steps/s (anchor {SB3_PPO_ENV_STEPS_PER_S:,.0f} on the H200)",
        },
        {
            "model": "dqn",
            "case": "Stable-Baselines3 DQN, CartPole, batch 256, train_freq 1 (live)",
            "ms_per_step": dqn_seconds * 1e3 / gradient_steps,
            "reference_ms": None,
            "notes": (
                f"{gradient_steps / dqn_seconds:,.0f} gradient steps/s "
                f"(anchor {SB3_DQN_GRADIENT_STEPS_PER_S:,.0f} on the H200)"
            ),
        },
    ]


def benchmark(device: torch.device) -> list[dict]:
    """Rows ``{model, case, ms_per_step, reference_ms, notes}`` for DQN and PPO in every execution mode.

    ``reference_ms`` is the time SB3's anchor would take for the same work: one gradient step (DQN), or the env
    steps of one minibatch update (PPO).
    """
    full = device.type == "cuda"
    if full:
        data = random_features(device, n_symbols=4, bars_per_symbol=20 * 390, n_observed=N_FEATURES)
        dqn_cases = [
            ("64 envs, window 64, replay batch 256", DQNConfig(), 256),
            ("1 env like SB3, window 64, replay batch 256", DQNConfig(env=TradingEnvConfig(num_envs=1)), 256),
        ]
        ppo_cases = [
            ("64 envs x 128 steps, 4 epochs x 4 minibatches of 2048", PPOConfig(), 2048),
            (
                "8 envs x 256 steps, 4 epochs x 8 minibatches of 256 like SB3",
                PPOConfig(num_steps=256, num_minibatches=8, env=TradingEnvConfig(num_envs=8)),
                256,
            ),
        ]
    else:
        data = random_features(device, n_symbols=2, bars_per_symbol=2000, n_observed=N_FEATURES)
        small_env = TradingEnvConfig(num_envs=8, observation_window=16, episode_length=128)
        dqn_cases = [
            (
                "small: 8 envs, window 16, 64-64, replay batch 32",
                DQNConfig(env=small_env, hidden_sizes=[64, 64], buffer_size=4096, learning_starts=256),
                32,
            )
        ]
        ppo_cases = [
            (
                "small: 8 envs x 32 steps, 64-64, 4 epochs x 4 minibatches of 64",
                PPOConfig(env=small_env, num_steps=32, hidden_sizes=[64, 64]),
                64,
            )
        ]
    rows = []
    for mode in COMPILE_MODES:
        for case, config, batch_size in dqn_cases:
            rows.append(dqn_row(case, config, batch_size, data, mode, full))
        for case, config, batch_size in ppo_cases:
            rows.append(ppo_row(case, config, batch_size, data, mode, full))
    return rows + sb3_rows(device, full)


def main() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"RL workloads on {name}, torch {torch.__version__}")
    if device.type != "cuda":
        print("Small CPU shapes: the ratios to the H200 anchors only show that the script runs.")
    print(f"{'model':<6} {'ms/step':>9} {'SB3 ms':>8}  case | notes")
    for row in benchmark(device):
        reference = "" if row["reference_ms"] is None else f"{row['reference_ms']:.3f}"
        print(f"{row['model']:<6} {row['ms_per_step']:>9.3f} {reference:>8}  {row['case']} | {row['notes']}")


if __name__ == "__main__":
    main()
