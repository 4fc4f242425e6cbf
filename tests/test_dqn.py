"""DQN: Huber loss, Double DQN targets, target-network updates, ε schedule, replay buffer, and learning to go long."""

from dataclasses import replace

import pytest
import torch
from conftest import make_learnable_features, trending_features

from gpubench.data.config import DataConfig
from gpubench.data.loader import load_features
from gpubench.measure.stability import StabilityMonitor
from gpubench.models.dqn.config import DQNConfig
from gpubench.models.dqn.workload import (
    DQNWorkload,
    QNetwork,
    ReplayBuffer,
    dqn_targets,
    huber_loss,
    linear_schedule,
    update_target,
)
from gpubench.models.trading_env.config import TradingEnvConfig
from gpubench.stats.config import StabilityConfig
from gpubench.stats.stability import stability_verdict
from gpubench.workload import ExecutionContext, OpCounter

TENSOR_FIELDS = ("values", "log_return", "symbol_id", "is_train")


def small_config(**overrides: object) -> DQNConfig:
    settings: dict = {
        "env": TradingEnvConfig(num_envs=4, observation_window=4, episode_length=16, transaction_cost=1e-3),
        "hidden_sizes": [32, 32],
        "buffer_size": 512,
        "learning_starts": 32,
        "exploration_steps": 400,
        "target_update_interval": 20,
        # One gradient step per step: these tests follow single updates (the recipe's ratio is tested in
        # tests/test_plan.py).
        "gradient_steps": 1,
    }
    settings.update(overrides)
    return DQNConfig(**settings)


def cpu_context(batch_size: int = 32, seed: int = 0) -> ExecutionContext:
    return ExecutionContext(device=torch.device("cpu"), batch_size=batch_size, seed=seed)


def test_huber_loss_by_hand() -> None:
    # Errors 0.5 (quadratic: 0.125), -2 (linear: 1.5) and 1 (the joint: 0.5); mean 0.70833...
    loss = huber_loss(torch.tensor([0.5, -2.0, 1.0]), torch.zeros(3))
    assert loss.item() == pytest.approx((0.125 + 1.5 + 0.5) / 3)


def test_double_dqn_target_uses_online_argmax_and_target_value() -> None:
    next_q_online = torch.tensor([[0.0, 1.0, 0.5]] * 2)  # prefers action 1
    next_q_target = torch.tensor([[5.0, 2.0, 7.0]] * 2)  # prefers action 2
    rewards = torch.tensor([1.0, 1.0])
    terminated = torch.tensor([0.0, 1.0])
    double = dqn_targets(rewards, terminated, next_q_online, next_q_target, gamma=0.5, double_dqn=True)
    vanilla = dqn_targets(rewards, terminated, next_q_online, next_q_target, gamma=0.5, double_dqn=False)
    # Double: the target network's value of the online choice (2.0); vanilla: the target's own max (7.0).
    # No bootstrap after termination: the target is the reward alone.
    assert double.tolist() == [1.0 + 0.5 * 2.0, 1.0]
    assert vanilla.tolist() == [1.0 + 0.5 * 7.0, 1.0]


def test_td_loss_is_the_huber_loss_to_double_dqn_targets_which_carry_no_gradient() -> None:
    config = small_config(learning_starts=64)
    workload = DQNWorkload(config, make_learnable_features(), cpu_context())
    workload.train_step()  # the target network now differs from the online one
    indices = workload.replay.sample_indices(32, torch.Generator().manual_seed(2))
    batch = workload.replay.batch(indices)
    s, s_next = batch.observations, batch.next_observations
    actions, rewards, terminated = batch.actions, batch.rewards, batch.terminated
    online, target = workload.q_network, workload.target_network
    with torch.no_grad():
        chosen = online(s_next).argmax(dim=1, keepdim=True)
        expected_targets = rewards + config.gamma * (1 - terminated) * target(s_next).gather(1, chosen).squeeze(1)
    expected = huber_loss(online(s).gather(1, actions[:, None]).squeeze(1), expected_targets)
    (expected_grad,) = torch.autograd.grad(expected, [online.hidden[0].weight])
    loss, q_taken = workload._td_loss(indices)
    (grad,) = torch.autograd.grad(loss, [online.hidden[0].weight])
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(grad, expected_grad)
    # The Q-values it returns beside the loss are the online network's of the taken actions.
    with torch.no_grad():
        torch.testing.assert_close(q_taken, online(s).gather(1, actions[:, None]).squeeze(1))


def test_polyak_update_is_exact_and_tau_one_copies() -> None:
    torch.manual_seed(0)
    online, target = QNetwork(3, [4]), QNetwork(3, [4])
    before = [p.detach().clone() for p in target.parameters()]
    update_target(target, online, tau=0.25)
    for new, old, theta in zip(target.parameters(), before, online.parameters(), strict=True):
        torch.testing.assert_close(new, 0.25 * theta + 0.75 * old)
    update_target(target, online, tau=1.0)
    assert all(torch.equal(a, b) for a, b in zip(target.parameters(), online.parameters(), strict=True))


def test_epsilon_schedule_endpoints() -> None:
    assert linear_schedule(1.0, 0.05, 1000, 0) == 1.0
    assert linear_schedule(1.0, 0.05, 1000, 500) == pytest.approx(0.525)
    assert linear_schedule(1.0, 0.05, 1000, 1000) == pytest.approx(0.05)
    assert linear_schedule(1.0, 0.05, 1000, 10**6) == pytest.approx(0.05)


def test_replay_buffer_wraps_at_capacity() -> None:
    buffer = ReplayBuffer(capacity=5, observation_size=1, device=torch.device("cpu"))
    for first in (0, 2, 4):  # transitions 0..5 in three adds of two
        ids = torch.tensor([first, first + 1])
        buffer.add(ids[:, None].float(), ids, ids.float(), ids[:, None].float() + 100, torch.zeros(2))
    assert (buffer.size.item(), buffer.cursor.item()) == (5, 1)
    # Transition 5 overwrote the oldest slot; slots 1..4 still hold transitions 1..4.
    assert buffer.actions.tolist() == [5, 1, 2, 3, 4]
    assert buffer.next_observations[:, 0].tolist() == [105.0, 101.0, 102.0, 103.0, 104.0]
    drawn = buffer.sample_indices(1000, torch.Generator().manual_seed(0))
    assert set(drawn.tolist()) == {0, 1, 2, 3, 4}


def test_replay_buffer_samples_only_filled_slots() -> None:
    buffer = ReplayBuffer(capacity=100, observation_size=1, device=torch.device("cpu"))
    buffer.add(torch.zeros(3, 1), torch.zeros(3, dtype=torch.int64), torch.zeros(3), torch.zeros(3, 1), torch.zeros(3))
    drawn = buffer.sample_indices(500, torch.Generator().manual_seed(1))
    assert set(drawn.tolist()) == {0, 1, 2}


def test_prefill_makes_every_step_a_gradient_step() -> None:
    workload = DQNWorkload(small_config(learning_starts=30), make_learnable_features(), cpu_context())
    # 30 transitions with 4 environments: 8 prefill env steps, 32 transitions, no gradient step yet.
    assert workload.replay.size.item() == 32
    assert workload.env_steps == 32
    assert workload.optimizer.state == {}
    workload.train_step()
    step = workload.optimizer.state[next(workload.q_network.parameters())]["step"]
    assert step.item() == 1
    assert workload.replay.size.item() == 36
    assert workload.samples_per_step == 4.0


@pytest.mark.parametrize("storage", ["indices", "observations"])
def test_truncated_transitions_store_the_final_observation_and_bootstrap(storage: str) -> None:
    data = make_learnable_features()
    env = TradingEnvConfig(num_envs=4, observation_window=4, episode_length=1, transaction_cost=0.0)
    workload = DQNWorkload(small_config(env=env, learning_starts=0, replay_storage=storage), data, cpu_context())
    acted_on = workload.observation.clone()
    workload.train_step()
    stored = workload.replay.batch(torch.arange(4))
    # Every episode lasts one step: all four transitions are truncations, stored as not terminated (bootstrap)...
    assert stored.terminated.tolist() == [0.0] * 4
    torch.testing.assert_close(stored.observations, acted_on)
    # ...with the observation the step reached (the window moved on by one bar), not the reset observation.
    n = data.n_features
    torch.testing.assert_close(stored.next_observations[:, 2 * n : 3 * n], acted_on[:, 3 * n : 4 * n])
    assert not torch.equal(stored.next_observations, workload.observation)


def test_the_index_buffer_samples_exactly_the_observations_the_copy_buffer_stored() -> None:
    # Two workloads, same seed and data, one per storage: the same actions and transitions, as the storage draws
    # no random numbers. Over 50 steps (with resets and terminations along the way) every sampled batch matches.
    data = make_learnable_features()
    env = TradingEnvConfig(num_envs=8, observation_window=6, episode_length=20)
    workloads = {}
    for storage in ("indices", "observations"):
        torch.manual_seed(0)  # the same initial Q-network (the runner seeds before every build)
        workloads[storage] = DQNWorkload(
            small_config(env=env, replay_storage=storage, buffer_size=256), data, cpu_context()
        )
    for _ in range(50):
        for workload in workloads.values():
            workload.train_step()
    indices = workloads["indices"].replay.sample_indices(512, torch.Generator().manual_seed(3))
    by_index = workloads["indices"].replay.batch(indices)
    by_copy = workloads["observations"].replay.batch(indices)
    for name in ("observations", "actions", "rewards", "next_observations", "terminated"):
        torch.testing.assert_close(getattr(by_index, name), getattr(by_copy, name), rtol=0, atol=0)
    assert workloads["indices"].replay.size.item() == workloads["observations"].replay.size.item() == 256


def test_the_index_buffer_takes_megabytes_where_observation_copies_took_hundreds() -> None:
    # The default buffer of 100,000 transitions; an observation is 64 bars x 6 features + a 3-wide position one-hot.
    # With the default 9 features (579 floats an observation) the copies took 100,000 x 1,161 x 4 B = 443 MiB.
    config = DQNConfig(buffer_size=100_000)
    data = make_learnable_features()
    workloads = {
        storage: DQNWorkload(replace(config, replay_storage=storage, learning_starts=64), data, cpu_context())
        for storage in ("indices", "observations")
    }
    observation_size = 64 * data.n_features + 3
    assert workloads["observations"].env.observation_size == observation_size
    assert workloads["observations"].replay.nbytes == 100_000 * (2 * observation_size + 3) * 4
    assert workloads["indices"].replay.nbytes == 100_000 * 7 * 8  # 5.3 MiB, whatever the observation
    assert workloads["indices"].describe()["replay_buffer_mb"] == pytest.approx(5.341, abs=1e-3)


def test_target_network_frozen_between_updates_and_equal_after_hard_copy() -> None:
    workload = DQNWorkload(small_config(target_update_interval=5), make_learnable_features(), cpu_context())
    initial = [p.detach().clone() for p in workload.target_network.parameters()]
    for _ in range(4):
        workload.train_step()
        assert all(torch.equal(a, b) for a, b in zip(workload.target_network.parameters(), initial, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(workload.q_network.parameters(), initial, strict=True))
    workload.train_step()
    pairs = zip(workload.target_network.parameters(), workload.q_network.parameters(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)


def test_epsilon_follows_the_schedule_over_environment_transitions_then_acts_greedily() -> None:
    config = small_config(learning_starts=0, exploration_steps=40, exploration_final=0.0)
    workload = DQNWorkload(config, make_learnable_features(), cpu_context())
    assert workload.epsilon == 1.0
    for _ in range(5):  # 5 steps x 4 environments = 20 transitions: half-way
        workload.train_step()
    assert workload.epsilon == pytest.approx(0.5)
    for _ in range(5):
        workload.train_step()
    assert workload.epsilon == 0.0
    with torch.no_grad():
        greedy = workload.q_network(workload.observation).argmax(dim=1)
    slot = workload.replay.cursor.item()
    workload.train_step()
    assert torch.equal(workload.replay.actions[slot : slot + 4], greedy)


def test_step_reports_detached_device_scalars() -> None:
    workload = DQNWorkload(small_config(), make_learnable_features(), cpu_context())
    result = workload.train_step()
    assert result.loss.shape == () and not result.loss.requires_grad
    assert result.grad_norm is not None and result.grad_norm.shape == ()
    assert torch.isfinite(result.loss) and result.grad_norm.item() > 0


def test_a_step_reports_its_last_updates_largest_q_and_the_return_bound() -> None:
    config = small_config(gradient_steps=3, gamma=0.9)
    workload = DQNWorkload(config, make_learnable_features(), cpu_context())
    updates: list[torch.Tensor] = []
    gradient_step = workload.gradient_step

    def recording_gradient_step() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        loss, grad_norm, q_taken = gradient_step()
        updates.append(q_taken)
        return loss, grad_norm, q_taken

    workload.gradient_step = recording_gradient_step
    signals = workload.train_step().rl
    assert signals is not None and signals.value_abs_max is not None
    assert len(updates) == 3
    assert signals.value_abs_max.item() == updates[-1].abs().max().item()
    assert signals.return_bound == pytest.approx(workload.env.max_abs_reward / (1 - 0.9))
    # The TD loss's ceiling is the Huber loss of twice that bound (both the value and its target within it).
    largest_error = torch.tensor([2 * signals.return_bound], dtype=torch.float64)
    assert signals.critic_loss_ceiling == pytest.approx(huber_loss(largest_error, torch.zeros(1)).item())


def test_learnt_policy_goes_long_on_an_always_rising_price() -> None:
    torch.manual_seed(0)
    config = small_config(learning_rate=1e-3, gamma=0.9, exploration_steps=1500, target_update_interval=50)
    workload = DQNWorkload(config, trending_features(400, 0.05), cpu_context(batch_size=64))
    for _ in range(600):
        workload.train_step()
    env = workload.env
    with torch.no_grad():
        for position in (-1, 0, 1):
            observation = env.observe(torch.tensor([10, 50, 200]), torch.full((3,), position))
            assert workload.q_network(observation).argmax(dim=1).tolist() == [2, 2, 2]


def test_op_counter_counts_operations_but_not_views() -> None:
    x = torch.zeros(4, 3, requires_grad=True)
    with OpCounter() as ops:
        y = (x.t() * 2).sum()  # t is a view; mul and sum are operations
    assert ops.count == 2
    with OpCounter() as ops:
        y.backward()  # the seed gradient, mul's backward and a copy into x.grad (t's gradient is not contiguous)
    assert ops.count == 3


@pytest.mark.parametrize(("storage", "most_ops"), [("observations", 89), ("indices", 97)])
def test_a_step_launches_a_pinned_number_of_tensor_operations(storage: str, most_ops: int) -> None:
    # On a GPU this step is launch-bound: every tensor operation costs a kernel launch (microseconds) whatever its
    # size, so the count sets the eager speed. It was 114 before the environment, the replay buffer and the TD loss
    # were trimmed; the pin keeps it from growing back unnoticed. The count does not depend on the data. The index
    # buffer rebuilds observations when sampling: 8 more operations, for a buffer of megabytes, not hundreds. The
    # health check's largest |Q| is one operation a step (88 and 96 before it), not one per gradient step.
    workload = DQNWorkload(small_config(replay_storage=storage), make_learnable_features(), cpu_context())
    workload.train_step()
    with OpCounter() as ops:
        workload.train_step()
    assert ops.count <= most_ops


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["false", "reduce-overhead"])
def test_on_cuda_replayed_steps_advance_the_live_state_and_learn(mode: str) -> None:
    device = torch.device("cuda")
    data = trending_features(400, 0.05)
    data = replace(data, **{name: getattr(data, name).to(device) for name in TENSOR_FIELDS})
    torch.manual_seed(0)
    config = small_config(
        learning_rate=1e-3, gamma=0.9, exploration_steps=1500, target_update_interval=50, buffer_size=10_000
    )
    context = ExecutionContext(device=device, batch_size=64, compile_mode=mode, seed=0)
    workload = DQNWorkload(config, data, context)
    for _ in range(600):
        result = workload.train_step()
    # Prefill 32 transitions, then 4 per step; a CUDA graph's capture is preceded by 3 eager warm-up steps.
    warmup_steps = 3 if mode == "reduce-overhead" else 0
    assert workload.replay.size.item() == 32 + 4 * (600 + warmup_steps)
    assert torch.isfinite(result.loss).item()
    with torch.no_grad():
        for position in (-1, 0, 1):
            observation = workload.env.observe(
                torch.tensor([10, 50, 200], device=device), torch.full((3,), position, device=device)
            )
            assert workload.q_network(observation).argmax(dim=1).tolist() == [2, 2, 2]


# ------------------------------------------------------------------------------------------------ health

#: The quick preset's market: two synthetic symbols, five days (loaded once; the health runs share it).
QUICK_MARKET: list = []


def quick_dqn_health(learning_rate: float, seed: int):
    """The stability verdict of a DQN with the quick preset's shapes (8 environments, a 16-bar window, 64x64
    network, 2 gradient steps a step) but ``learning_rate``, measured as the runner does: one warmup epoch, whose
    health is dropped, then eight measured epochs of 16 steps (32 updates) each."""
    if not QUICK_MARKET:
        QUICK_MARKET.append(load_features(DataConfig(symbols=["SYNA", "SYNB"], days=5), "cpu")[0])
    config = DQNConfig(
        env=TradingEnvConfig(num_envs=8, observation_window=16, episode_length=128),
        batch_size=32,
        buffer_size=4096,
        learning_starts=256,
        target_update_interval=100,
        exploration_steps=2000,
        gradient_steps=2,
        hidden_sizes=[64, 64],
        learning_rate=learning_rate,
    )
    torch.manual_seed(seed)
    workload = DQNWorkload(config, QUICK_MARKET[0], cpu_context(seed=seed))
    cfg = StabilityConfig()
    monitor = StabilityMonitor(cfg, "cpu")
    epochs = []
    for _ in range(9):
        for _ in range(16):
            monitor.observe(workload.train_step())
        epochs.append(monitor.end_epoch())
    return stability_verdict(epochs[1:], cfg)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_default_dqn_run_is_stable_by_every_signal(seed: int) -> None:
    report = quick_dqn_health(1e-4, seed)
    assert report.stability == "STABLE", report.reasons
    assert report.reasons == []
    assert report.rl is not None and report.rl.critic_loss_name == "TD loss"
    # The quick market's returns stay within 0.0230 / (1 - 0.99) = 2.30 (tests/test_ppo.py works it out); a healthy
    # Q-network's values stay far inside (under 0.5 in these runs), its gradient norms within a few times their
    # first epochs'.
    assert report.rl.return_bound == pytest.approx(2.297, rel=1e-3)
    assert report.rl.max_value_abs < report.rl.return_bound
    assert max(report.epoch_max_grad_norms) < 10 * max(report.epoch_max_grad_norms[:2])


@pytest.mark.parametrize("seed", [0, 2])
def test_dqn_with_a_learning_rate_of_ten_is_unstable_by_its_q_values(seed: int) -> None:
    # Adam's first steps at a learning rate of 10 kill every ReLU of the last hidden layer (all 64 within five
    # steps, in the warmup): what is left is a Q-function of the head's biases, the same for every state, moved by
    # steps of the order of 10, its values averaging past any return the rewards allow. Its TD loss stays under ten
    # times its ceiling (values far past any return still satisfy r + γ Q' ≈ Q) and its gradient norms steady: the
    # old verdict, judging those, called both seeds STABLE.
    report = quick_dqn_health(10.0, seed)
    assert report.stability == "UNSTABLE"
    assert any(reason.startswith("critic values beyond any return: ") for reason in report.reasons)
    assert report.rl is not None
    assert max(report.rl.epoch_mean_value_abs_maxima) > 2 * report.rl.return_bound
