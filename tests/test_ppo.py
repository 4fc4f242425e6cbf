"""PPO: GAE by hand and against a plain loop, the clipped objective, the update schedule, and learning a trend."""

import copy
import math
import random
from dataclasses import replace

import pytest
import torch
from conftest import make_learnable_features, trending_features

from gpubench.data.config import DataConfig
from gpubench.data.loader import load_features
from gpubench.errors import ConfigError
from gpubench.measure.flops import count_step
from gpubench.measure.stability import StabilityMonitor
from gpubench.measure.timing import size_epoch
from gpubench.models.ppo.config import PPOConfig
from gpubench.models.ppo.workload import PPOWorkload, clipped_surrogate_loss, compute_gae
from gpubench.models.trading_env.config import TradingEnvConfig
from gpubench.stats.config import StabilityConfig
from gpubench.stats.stability import stability_verdict
from gpubench.workload import ExecutionContext, OpCounter

TENSOR_FIELDS = ("values", "log_return", "symbol_id", "is_train")


def gae_reference(
    rewards: list[float], values: list[float], dones: list[float], next_value: float, gamma: float, lam: float
) -> list[float]:
    """GAE for one environment, one plain Python float at a time, straight from the definition."""
    advantages = [0.0] * len(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        following = next_value if t == len(rewards) - 1 else values[t + 1]
        delta = rewards[t] + gamma * following * (1 - dones[t]) - values[t]
        running = delta + gamma * lam * (1 - dones[t]) * running
        advantages[t] = running
    return advantages


#: A price rising 2% a bar with noise features: the trend is the whole signal.
TREND = trending_features(600, 0.02, noise_features=True)


def small_config(**overrides: object) -> PPOConfig:
    settings: dict = {
        "env": TradingEnvConfig(num_envs=4, observation_window=4, episode_length=32, transaction_cost=1e-3),
        "num_steps": 16,
        "update_epochs": 3,
        "num_minibatches": 2,
        "hidden_sizes": [32, 32],
    }
    settings.update(overrides)
    return PPOConfig(**settings)


def cpu_context(batch_size: int = 32) -> ExecutionContext:
    return ExecutionContext(device=torch.device("cpu"), batch_size=batch_size, seed=0)


def test_gae_hand_example() -> None:
    rewards = torch.tensor([[1.0], [0.0], [2.0]])
    values = torch.tensor([[0.5], [0.4], [0.3]])
    dones = torch.tensor([[0.0], [1.0], [0.0]])
    advantages, returns = compute_gae(rewards, values, dones, torch.tensor([0.2]), gamma=0.99, lam=0.95)
    # t=2: 2 + 0.99*0.2 - 0.3 = 1.898; t=1 ends the episode: 0 - 0.4 = -0.4;
    # t=0: (1 + 0.99*0.4 - 0.5) + 0.99*0.95*(-0.4) = 0.896 - 0.3762 = 0.5198.
    torch.testing.assert_close(advantages[:, 0], torch.tensor([0.5198, -0.4, 1.898]))
    torch.testing.assert_close(returns, advantages + values)


def test_gae_with_lambda_zero_is_the_td_error() -> None:
    generator = torch.Generator().manual_seed(3)
    rewards, values = torch.randn(6, 5, generator=generator), torch.randn(6, 5, generator=generator)
    dones = (torch.rand(6, 5, generator=generator) < 0.3).float()
    next_value = torch.randn(5, generator=generator)
    advantages, _ = compute_gae(rewards, values, dones, next_value, gamma=0.9, lam=0.0)
    following = torch.cat([values[1:], next_value[None]])
    torch.testing.assert_close(advantages, rewards + 0.9 * following * (1 - dones) - values)


@pytest.mark.parametrize("num_steps", [1, 7, 8, 37, 128])
def test_gae_scan_equals_the_per_environment_loop(num_steps: int) -> None:
    rng = random.Random(num_steps)
    num_envs = 4
    rewards = [[rng.gauss(0, 1) for _ in range(num_envs)] for _ in range(num_steps)]
    values = [[rng.gauss(0, 1) for _ in range(num_envs)] for _ in range(num_steps)]
    dones = [[float(rng.random() < 0.25) for _ in range(num_envs)] for _ in range(num_steps)]
    next_value = [rng.gauss(0, 1) for _ in range(num_envs)]
    advantages, _ = compute_gae(
        torch.tensor(rewards), torch.tensor(values), torch.tensor(dones), torch.tensor(next_value), 0.97, 0.9
    )
    for env in range(num_envs):
        column = [[row[env] for row in table] for table in (rewards, values, dones)]
        expected = gae_reference(*column, next_value[env], 0.97, 0.9)
        assert advantages[:, env].tolist() == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize(
    ("ratio", "advantage", "gradient_flows"),
    [
        (1.5, 1.0, False),  # improved past 1 + ε on a good action: clipped, no push further
        (0.5, -1.0, False),  # reduced past 1 - ε on a bad action: clipped
        (0.5, 1.0, True),  # a good action made less likely: the pessimistic term keeps the gradient
        (1.5, -1.0, True),  # a bad action made more likely: gradient
        (1.1, 1.0, True),  # inside the trust region
        (0.9, -1.0, True),
    ],
)
def test_clipped_objective_passes_zero_gradient_where_it_should(
    ratio: float, advantage: float, gradient_flows: bool
) -> None:
    new_logprob = torch.tensor([math.log(ratio)], requires_grad=True)
    old_logprob = torch.zeros(1)
    loss = clipped_surrogate_loss(torch.exp(new_logprob - old_logprob), torch.tensor([advantage]), clip_coef=0.2)
    loss.backward()
    assert new_logprob.grad is not None
    if gradient_flows:
        assert new_logprob.grad.item() == pytest.approx(-advantage * ratio)
    else:
        assert new_logprob.grad.item() == 0.0


def test_initial_policy_is_near_uniform_with_entropy_ln3() -> None:
    torch.manual_seed(0)
    workload = PPOWorkload(small_config(), make_learnable_features(), cpu_context())
    with torch.no_grad():
        log_policy = workload.agent.log_policy(workload.observation)
    entropy = -(log_policy.exp() * log_policy).sum(dim=1)
    assert entropy.min().item() == pytest.approx(math.log(3), abs=1e-3)


def test_batch_size_sets_minibatch_and_number_of_environments() -> None:
    workload = PPOWorkload(small_config(), make_learnable_features(), cpu_context(batch_size=32))
    # 32 x 2 minibatches = a rollout of 64 env steps = 4 environments x 16 steps; 3 epochs x 2 minibatches.
    assert (workload.env.num_envs, workload.rollout_size, workload.minibatch_size) == (4, 64, 32)
    assert workload.samples_per_step == 64 / 6
    # 3 environments x 16 steps split in 3 is a valid configuration, but batch 24 implies 4 x 16 = 64 env steps.
    config = small_config(num_minibatches=3, env=TradingEnvConfig(num_envs=3, observation_window=4))
    with pytest.raises(ConfigError, match=r"workloads\.ppo\.num_minibatches.*batch size 24"):
        PPOWorkload(config, make_learnable_features(), cpu_context(batch_size=24))


def test_config_batch_size_defaults_to_the_configured_rollout_split() -> None:
    assert small_config().batch_size == 4 * 16 // 2


def test_first_minibatch_ratio_is_one_and_approx_kl_zero() -> None:
    torch.manual_seed(0)
    workload = PPOWorkload(small_config(), make_learnable_features(), cpu_context())
    policy_at_rollout = copy.deepcopy(workload.agent)
    workload.train_step()
    losses = workload.last_losses
    assert losses is not None
    assert losses.approx_kl.item() == pytest.approx(0.0, abs=1e-7)
    assert losses.clip_fraction.item() == 0.0
    # Recompute the first minibatch's ratio with the policy that collected the rollout.
    rollout = workload.rollout
    first = rollout.minibatch_order[0, : workload.minibatch_size]
    with torch.no_grad():
        log_policy = policy_at_rollout.log_policy(rollout.observations.flatten(0, 1)[first])
    new_logprobs = log_policy.gather(1, rollout.actions.flatten()[first].unsqueeze(1)).squeeze(1)
    ratio = torch.exp(new_logprobs - rollout.logprobs.flatten()[first])
    torch.testing.assert_close(ratio, torch.ones_like(ratio))


def test_optimizer_steps_per_iteration_equal_epochs_times_minibatches() -> None:
    workload = PPOWorkload(small_config(), make_learnable_features(), cpu_context())
    first_param = next(workload.agent.parameters())
    for _ in range(6):  # 3 epochs x 2 minibatches: one iteration, one rollout
        workload.train_step()
    assert workload.optimizer.state[first_param]["step"].item() == 6
    assert workload.iteration == 1
    workload.train_step()
    assert workload.iteration == 2
    assert workload.optimizer.state[first_param]["step"].item() == 7


def test_an_iteration_is_update_epochs_times_minibatches_steps_and_the_position_follows_the_updates() -> None:
    workload = PPOWorkload(small_config(update_epochs=3, num_minibatches=2), make_learnable_features(), cpu_context())
    assert workload.steps_per_iteration == 6
    positions = []
    for _ in range(8):
        positions.append(workload.steps_into_iteration)
        workload.train_step()
    assert positions == [0, 1, 2, 3, 4, 5, 0, 1]


def test_sized_epochs_start_with_a_rollout_and_hold_whole_iterations() -> None:
    # The real workload through the real sizing, on a fake clock of 50 ms a step, after the eager FLOP count's
    # step: the first step (position 1), 4 steps to finish its iteration, one 6-step probe (0.3 s, over a quarter
    # of 1 s), then epochs of 1 s / 50 ms = 20 steps rounded up to 4 iterations.
    workload = PPOWorkload(small_config(update_epochs=3, num_minibatches=2), make_learnable_features(), cpu_context())
    count_step(workload)
    block_starts = []

    def time_steps(count: int) -> float:
        block_starts.append(workload.steps_into_iteration)
        for _ in range(count):
            workload.train_step()
        return 0.05 * count

    sizing = size_epoch(
        time_steps,
        min_seconds=1.0,
        max_steps=10**5,
        steps_per_iteration=workload.steps_per_iteration,
        steps_into_iteration=workload.steps_into_iteration,
    )
    assert sizing.probe_steps == (4, 6)
    assert sizing.steps_per_epoch == 24
    assert block_starts == [1, 2, 0]
    for _ in range(2):
        rollouts_before = workload.iteration
        time_steps(sizing.steps_per_epoch)
        assert block_starts[-1] == 0
        assert workload.iteration - rollouts_before == 4


def test_learning_rate_anneals_linearly_over_total_timesteps() -> None:
    # A rollout is 64 env steps; 256 total timesteps = 4 iterations, so iteration i uses (1 - i/4) x the rate.
    workload = PPOWorkload(
        small_config(total_timesteps=256, learning_rate=1e-3), make_learnable_features(), cpu_context()
    )
    rates = []
    for _ in range(5):
        for _ in range(6):
            workload.train_step()
        rates.append(workload.optimizer.param_groups[0]["lr"].item())
    assert rates == pytest.approx([1e-3, 0.75e-3, 0.5e-3, 0.25e-3, 0.0])


def test_truncated_episodes_are_bootstrapped_and_end_the_gae_episode() -> None:
    env = TradingEnvConfig(num_envs=4, observation_window=4, episode_length=1, transaction_cost=0.0)
    workload = PPOWorkload(small_config(env=env, total_timesteps=10**6), TREND, cpu_context())
    workload.train_step()
    rollout = workload.rollout
    # Every step truncates: done everywhere, and each reward is the trade's return + γ V(the bar it reached).
    assert rollout.dones.eq(1.0).all()
    position = rollout.actions.float() - 1
    bootstrap = rollout.rewards - position * 0.02
    assert bootstrap.abs().min().item() > 0
    torch.testing.assert_close(rollout.advantages, rollout.rewards - rollout.values)


def test_agent_improves_on_a_trending_series() -> None:
    torch.manual_seed(0)
    config = small_config(learning_rate=3e-3, gamma=0.9, total_timesteps=10**6, update_epochs=4, num_minibatches=2)
    workload = PPOWorkload(config, TREND, cpu_context(batch_size=64))  # 8 envs x 16 steps

    def mean_reward_and_long_share() -> tuple[float, float]:
        return workload.rollout.rewards.mean().item(), (workload.rollout.actions == 2).float().mean().item()

    workload.train_step()
    first_reward, first_long = mean_reward_and_long_share()
    for _ in range(30 * workload.updates_per_iteration):
        workload.train_step()
    last_reward, last_long = mean_reward_and_long_share()
    assert first_long < 0.5
    assert last_long > 0.9
    assert last_reward > first_reward + 0.01


def test_rollout_values_and_bootstraps_are_the_collecting_networks_on_the_recorded_observations() -> None:
    # The critic's values, the truncation bootstraps and the log-probabilities are computed after the loop over
    # time, over the whole rollout at once; they must equal what the networks give on the recorded observations.
    env = TradingEnvConfig(num_envs=4, observation_window=4, episode_length=5, transaction_cost=0.0)
    config = small_config(env=env, gamma=0.9, total_timesteps=10**6)
    workload = PPOWorkload(config, TREND, cpu_context())
    for _ in range(workload.updates_per_iteration):  # train first, so the networks are not the initial ones
        workload.train_step()
    agent = copy.deepcopy(workload.agent)
    workload.train_step()
    rollout = workload.rollout
    with torch.no_grad():
        torch.testing.assert_close(rollout.values, agent.value(rollout.observations))
        log_policy = agent.log_policy(rollout.observations)
        torch.testing.assert_close(rollout.logprobs, log_policy.gather(2, rollout.actions.unsqueeze(2)).squeeze(2))
        trade_returns = (rollout.actions - 1) * 0.02
        bootstrap = config.gamma * agent.value(rollout.final_observations) * rollout.truncated
        torch.testing.assert_close(rollout.rewards, trade_returns + bootstrap)
    # Episodes of 5 steps in a rollout of 16: some steps truncate; where none ends, a step's final observation is
    # the next step's observation.
    assert rollout.truncated.any() and not rollout.truncated.all()
    next_observations = torch.cat([rollout.observations[1:], workload.observation.unsqueeze(0)])
    going_on = rollout.dones == 0
    assert torch.equal(rollout.final_observations[going_on], next_observations[going_on])


def test_an_iteration_launches_few_tensor_operations() -> None:
    # On a GPU PPO is launch-bound: every tensor operation costs a kernel launch (microseconds) whatever its size,
    # so the count sets the eager speed. Before the rollout and the loss were trimmed, an iteration of this
    # configuration (16 steps, 6 minibatch updates) took 2,146 operations and each further env step 77 (the GAE
    # loop's share included); the pins keep them from growing back unnoticed. The counts do not depend on the data.
    ops_per_iteration = {}
    for num_steps in (16, 32):
        workload = PPOWorkload(small_config(num_steps=num_steps), make_learnable_features(), cpu_context(2 * num_steps))
        for _ in range(workload.updates_per_iteration):
            workload.train_step()
        with OpCounter() as ops:
            for _ in range(workload.updates_per_iteration):
                workload.train_step()
        ops_per_iteration[num_steps] = ops.count
    assert ops_per_iteration[16] <= 1283
    assert (ops_per_iteration[32] - ops_per_iteration[16]) / 16 <= 28.25


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["false", "reduce-overhead"])
def test_on_cuda_replayed_iterations_keep_the_ratio_at_one_and_learn(mode: str) -> None:
    device = torch.device("cuda")
    data = TREND
    data = replace(data, **{name: getattr(data, name).to(device) for name in TENSOR_FIELDS})
    torch.manual_seed(0)
    config = small_config(learning_rate=3e-3, gamma=0.9, total_timesteps=10**6, update_epochs=4, num_minibatches=2)
    context = ExecutionContext(device=device, batch_size=64, compile_mode=mode, seed=0)
    workload = PPOWorkload(config, data, context)
    for _ in range(workload.updates_per_iteration):
        workload.train_step()
    first_observations = workload.rollout.observations.clone()
    workload.train_step()  # a new rollout (a graph replay under reduce-overhead), then its first minibatch
    assert not torch.equal(workload.rollout.observations, first_observations)
    assert workload.last_losses is not None
    assert workload.last_losses.approx_kl.item() == pytest.approx(0.0, abs=1e-6)
    for _ in range(30 * workload.updates_per_iteration):
        workload.train_step()
    assert (workload.rollout.actions == 2).float().mean().item() > 0.9


def test_the_step_count_is_an_iterations_average_not_its_rollout_step() -> None:
    # A rollout step and a minibatch update counted one at a time, against count_step's average over an iteration
    # of 6 (3 epochs x 2 minibatches): one rollout step and 5 updates.
    config = small_config(update_epochs=3, num_minibatches=2)
    by_step = PPOWorkload(config, make_learnable_features(), cpu_context())
    launches = []
    for _ in range(by_step.updates_per_iteration + 1):
        with OpCounter() as ops:
            by_step.train_step()
        launches.append(ops.count)
    rollout_step, update = launches[by_step.updates_per_iteration], launches[1]
    assert rollout_step > 3 * update  # the rollout's policy and environment steps
    counts = count_step(PPOWorkload(config, make_learnable_features(), cpu_context()))
    assert counts.launches == round((rollout_step + 5 * update) / 6)


# ------------------------------------------------------------------------------------------------ health


def quick_ppo_health(learning_rate: float):
    """The stability verdict of a small PPO with the recipe's defaults but ``learning_rate``, on the quick preset's
    market (two synthetic symbols, five days) and shapes, measured as the runner does: one warmup epoch, whose
    health is dropped, then ten measured epochs of two iterations (80 minibatch updates) each."""
    data, _ = load_features(DataConfig(symbols=["SYNA", "SYNB"], days=5), "cpu")
    config = PPOConfig(
        env=TradingEnvConfig(num_envs=8, observation_window=16, episode_length=128),
        num_steps=32,
        num_minibatches=4,
        hidden_sizes=[64, 64],
        learning_rate=learning_rate,
    )
    torch.manual_seed(0)
    workload = PPOWorkload(config, data, cpu_context(batch_size=config.batch_size))
    cfg = StabilityConfig()
    monitor = StabilityMonitor(cfg, "cpu")
    epochs = []
    for _ in range(11):
        for _ in range(2 * workload.updates_per_iteration):
            monitor.observe(workload.train_step())
        epochs.append(monitor.end_epoch())
    return stability_verdict(epochs[1:], cfg)


def test_a_healthy_default_ppo_run_is_stable_whatever_its_surrogate_loss_does() -> None:
    report = quick_ppo_health(2.5e-4)
    assert report.stability == "STABLE", report.reasons
    assert report.reasons == []
    assert report.loss_trend_judged is False
    assert report.rl is not None and report.rl.critic_loss_name == "value loss"
    # The quick market's largest |reward| is its largest |log return| (0.0228) plus a short-to-long trade's cost
    # (2 x 1e-4): returns stay within 0.0230 / (1 - 0.99) = 2.30, a value loss within 0.5 (2 x 2.30)^2 = 10.6.
    assert report.rl.critic_loss_ceiling == pytest.approx(10.56, rel=1e-3)
    assert max(report.rl.epoch_mean_critic_losses) < 0.1
    assert max(report.rl.epoch_mean_approx_kls) < 0.02
    assert max(report.rl.epoch_mean_clip_fractions) < 0.25


def test_ppo_with_a_learning_rate_of_ten_is_unstable_by_its_value_loss_and_kl() -> None:
    # The policy collapses within the warmup and the critic's values leave the range of any return; the loss's
    # trend shows nothing (the old verdict, judging it, called this run STABLE).
    report = quick_ppo_health(10.0)
    assert report.stability == "UNSTABLE"
    assert any(reason.startswith("value loss blow-up: epoch mean up to ") for reason in report.reasons)
    assert any(reason.startswith("approximate KL: epoch mean above 0.1 in ") for reason in report.reasons)
    assert min(report.rl.epoch_mean_critic_losses) > 10 * report.rl.critic_loss_ceiling
