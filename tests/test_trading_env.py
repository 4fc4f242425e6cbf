"""The vectorised trading environment: reward arithmetic, resets, truncation vs termination, no look-ahead."""

import pytest
import torch

from gpubench.data.tensors import FeatureTensors
from gpubench.models.trading_env.config import TradingEnvConfig
from gpubench.models.trading_env.env import TradingEnv

SHORT, FLAT, LONG = 0, 1, 2


def bar_indexed_features(log_return: list[float], n_train: int | None = None) -> FeatureTensors:
    """One symbol whose feature 0 is the bar's own index (so an observation shows which bars it holds)."""
    n_bars = len(log_return)
    index = torch.arange(n_bars, dtype=torch.float32)
    values = torch.stack([index, -index], dim=1)
    is_train = torch.arange(n_bars) < (n_bars if n_train is None else n_train)
    return FeatureTensors(
        values=values,
        log_return=torch.tensor(log_return, dtype=torch.float32),
        symbol_id=torch.zeros(n_bars, dtype=torch.int64),
        is_train=is_train,
        feature_names=("bar", "minus_bar"),
        target_column=0,
        known_future_columns=(),
        symbols=("HAND",),
    )


def make_env(data: FeatureTensors, num_envs: int = 1, window: int = 3, episode_length: int = 100, cost: float = 0.0):
    config = TradingEnvConfig(
        num_envs=num_envs, observation_window=window, episode_length=episode_length, transaction_cost=cost
    )
    return TradingEnv(config, data, num_envs, torch.Generator().manual_seed(0))


def actions(*values: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def test_reward_is_position_times_next_log_return_minus_cost_of_the_position_change() -> None:
    returns = [0.0, 0.0, 0.0, 0.01, -0.02, 0.03, 0.005, 0.0, 0.0, 0.0]
    env = make_env(bar_indexed_features(returns), cost=0.001)
    env.reset(bar_index=torch.tensor([2]))
    # flat -> long: +0.01 - 0.001; long -> short: -(-0.02) - 0.002; short -> short: -0.03; short -> flat: 0 - 0.001
    expected = [0.01 - 0.001, 0.02 - 0.002, -0.03, -0.001]
    for action, reward in zip((LONG, SHORT, SHORT, FLAT), expected, strict=True):
        step = env.step(actions(action))
        assert step.reward.item() == pytest.approx(reward, abs=1e-7)
    assert env.bar_index.item() == 6


def test_environments_step_independently() -> None:
    returns = [0.0, 0.0, 0.0, 0.01, 0.02, 0.0, 0.0, 0.0]
    env = make_env(bar_indexed_features(returns), num_envs=3, cost=0.0)
    env.reset(bar_index=torch.tensor([2, 3, 2]))
    step = env.step(actions(LONG, LONG, SHORT))
    torch.testing.assert_close(step.reward, torch.tensor([0.01, 0.02, -0.01]))
    torch.testing.assert_close(env.position, torch.tensor([1, 1, -1]))


def test_observation_holds_the_window_up_to_the_current_bar_and_the_position_one_hot() -> None:
    env = make_env(bar_indexed_features([0.0] * 10), window=3)
    observation = env.reset(bar_index=torch.tensor([4]))
    # Features are (bar, -bar) per row, rows 2, 3, 4, then the one-hot of "flat".
    assert observation.tolist() == [[2.0, -2.0, 3.0, -3.0, 4.0, -4.0, 0.0, 1.0, 0.0]]
    step = env.step(actions(SHORT))
    assert step.observation.tolist() == [[3.0, -3.0, 4.0, -4.0, 5.0, -5.0, 1.0, 0.0, 0.0]]
    assert env.observation_size == 9


def test_no_look_ahead_observation_never_shows_the_bar_whose_return_the_action_earns() -> None:
    returns = [0.001 * i for i in range(20)]
    env = make_env(bar_indexed_features(returns), num_envs=4, window=5)
    observation = env.reset()
    for _ in range(6):
        newest_bar = observation[:, 4 * 2].long()  # feature 0 of the last row of the window
        assert torch.equal(newest_bar, env.bar_index)
        step = env.step(torch.full((4,), LONG))
        # Holding long earns exactly the return of the bar after the newest one observed.
        rewarded_bar = (step.reward / 0.001).round().long()
        assert torch.equal(rewarded_bar, newest_bar + 1)
        observation = step.observation


def test_truncation_at_episode_length_resets_flat_with_the_final_observation_kept() -> None:
    env = make_env(bar_indexed_features([0.0] * 40), num_envs=2, window=3, episode_length=3)
    env.reset(bar_index=torch.tensor([5, 10]))
    for _ in range(2):
        step = env.step(actions(LONG, SHORT))
        assert not step.truncated.any() and not step.terminated.any()
    step = env.step(actions(LONG, SHORT))
    assert step.truncated.tolist() == [True, True]
    assert step.terminated.tolist() == [False, False]
    # The final observation is the bar reached (8 and 13) holding the last positions; then a fresh start, flat.
    assert step.final_observation[:, 4].tolist() == [8.0, 13.0]
    assert step.final_observation[:, 6:].tolist() == [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    assert env.episode_step.tolist() == [0, 0]
    assert env.position.tolist() == [0, 0]
    assert step.observation[:, 4].tolist() == env.bar_index.float().tolist()
    assert step.observation[:, 6:].tolist() == [[0.0, 1.0, 0.0]] * 2


def test_termination_when_the_training_split_runs_out_not_truncation() -> None:
    # Bars 0..11 are training data; bar 11 is the last one, so an episode standing on it has no next return.
    env = make_env(bar_indexed_features([0.0] * 16, n_train=12), window=3, episode_length=3)
    env.reset(bar_index=torch.tensor([8]))
    step = env.step(actions(LONG))
    assert (step.terminated.item(), step.truncated.item()) == (False, False)
    step = env.step(actions(LONG))
    assert (step.terminated.item(), step.truncated.item()) == (False, False)
    # Third step reaches bar 11: the data ran out and the time limit is hit together; termination wins.
    step = env.step(actions(LONG))
    assert (step.terminated.item(), step.truncated.item()) == (True, False)
    assert step.final_observation[0, 4].item() == 11.0


def test_resets_start_inside_the_training_split_with_a_full_window_and_a_next_bar() -> None:
    n_bars, n_train, window = 30, 20, 4
    env = make_env(bar_indexed_features([0.0] * n_bars, n_train=n_train), num_envs=64, window=window)
    starts = set()
    for _ in range(50):
        env.step(torch.full((64,), FLAT))
        starts.update(env.bar_index[env.episode_step == 0].tolist())
    # Standing bars t need bars t-3..t and t+1 in the training split: t in 3..18, all reached by random resets.
    assert starts == set(range(window - 1, n_train - 1))


def test_episodes_never_cross_symbols() -> None:
    two_symbols = bar_indexed_features([0.0] * 20)
    data = FeatureTensors(
        values=two_symbols.values,
        log_return=two_symbols.log_return,
        symbol_id=(torch.arange(20) >= 10).long(),
        is_train=two_symbols.is_train,
        feature_names=two_symbols.feature_names,
        target_column=0,
        known_future_columns=(),
        symbols=("A", "B"),
    )
    env = make_env(data, window=3, episode_length=100)
    env.reset(bar_index=torch.tensor([7]))
    env.step(actions(LONG))
    step = env.step(actions(LONG))  # reaches bar 9, the last of symbol A
    assert step.terminated.item()
