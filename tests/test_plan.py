"""Plans in the team's terms: steps and updates, the update-to-data ratio, measured evaluation and checkpoint costs
added to the estimate, and the batch what-ifs. Hand-worked numbers throughout."""

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from report_factory import batch_search, model_section, noisy_epochs_ms

from gpubench.decision.config import TrainingPlanConfig
from gpubench.decision.estimate import combine_estimates, estimate_training_time
from gpubench.errors import ConfigError
from gpubench.measure.recurring import measure_checkpoint, measure_evaluation
from gpubench.measure.timing import BlockTimer
from gpubench.models.dqn.config import DQNConfig
from gpubench.models.dqn.workload import DQNWorkload
from gpubench.models.ppo.config import PPOConfig
from gpubench.models.ppo.workload import PPOWorkload
from gpubench.models.trading_env.config import TradingEnvConfig
from gpubench.output.console import plan_lines
from gpubench.results import CheckpointCost, EvaluationCost, ThroughputPoint
from gpubench.workload import ExecutionContext, StepResult, Workload

ONE_OFF_SECONDS = 2.0 + (1500.0 + 1100.0) / 1e3  # the factory's calibration + its two warmup epochs


def rl_result(**kwargs):
    """DQN-like: 100 steps of 64 env steps each per 1 s epoch, 16 gradient updates a step (0.25 per env step)."""
    section = model_section(noisy_epochs_ms(1000.0), steps_per_epoch=100, samples_per_step=64, sample_unit="env_step")
    return replace(section, updates_per_step=16.0, updates_per_env_step=0.25, **kwargs)


def test_rl_plan_states_env_steps_updates_and_the_ratio() -> None:
    plan = TrainingPlanConfig(eval_every_steps=None, checkpoint_every_steps=None)
    estimate = estimate_training_time("dqn", rl_result(), plan)
    # 1e7 env steps / 64 per step = 156,250 steps; x 16 updates = 2,500,000 updates = 0.25 x 1e7.
    assert estimate.plan_steps == pytest.approx(156_250)
    assert estimate.plan_updates == pytest.approx(2_500_000)
    assert estimate.updates_per_env_step == 0.25
    assert estimate.recurring.seconds == 0.0
    # 156,250 steps / 100 per epoch = 1,562.5 epochs of 1 s.
    assert estimate.hours == pytest.approx((1562.5 + ONE_OFF_SECONDS) / 3600)
    record = estimate.model_estimate(decided_on=True, step_split=None, energy_kwh=None, energy_basis=None)
    assert record.updates_per_env_step == 0.25 and record.plan_updates == pytest.approx(2.5e6)
    assert "= 156,250 steps at 0.25 gradient updates per env step = 2,500,000 updates" in record.plan_basis


def test_evaluation_and_checkpoints_enter_the_estimate_and_both_bounds() -> None:
    # Evaluation: 4 ms per call of 64 env steps; a pass of 5,120 env steps = 80 calls = 0.32 s.
    # Checkpoint: 250 ms. Every 10,000 / 50,000 updates of 2,500,000: 250 passes and 50 checkpoints.
    result = rl_result(
        evaluation=EvaluationCost(ms_per_call=4.0, samples_per_call=64.0, calls_timed=16),
        checkpoint=CheckpointCost(ms_per_save=250.0, size_mb=3.0, saves_timed=2),
    )
    plan = TrainingPlanConfig(eval_every_steps=10_000, checkpoint_every_steps=50_000, eval_env_steps=5_120)
    estimate = estimate_training_time("dqn", result, plan)
    recurring_s = 250 * 0.32 + 50 * 0.25
    assert (estimate.recurring.eval_passes, estimate.recurring.checkpoints) == (250, 50)
    assert estimate.recurring.eval_pass_seconds == pytest.approx(0.32)
    assert estimate.recurring.seconds == pytest.approx(recurring_s)
    without = estimate_training_time("dqn", result, replace(plan, eval_every_steps=None, checkpoint_every_steps=None))
    assert estimate.hours - without.hours == pytest.approx(recurring_s / 3600)
    assert estimate.upper_hours - without.upper_hours == pytest.approx(recurring_s / 3600)
    assert estimate.lower_hours - without.lower_hours == pytest.approx(recurring_s / 3600)
    total = combine_estimates([estimate, estimate])
    assert total.hours == pytest.approx(2 * estimate.hours)
    record = estimate.model_estimate(decided_on=True, step_split=None, energy_kwh=None, energy_basis=None)
    assert (record.eval_passes, record.checkpoints) == (250, 50)
    assert record.recurring_seconds == pytest.approx(recurring_s)
    assert "250 validation passes of 0.32 s; 50 checkpoints of 0.25 s" in record.plan_basis


def test_supervised_plan_is_epochs_over_the_dataset_in_batches_and_a_validation_pass_is_a_fraction() -> None:
    # 360 x 390 x 1 x 50 passes = 7,020,000 windows; batch 64 -> 109,687.5 steps.
    section = model_section(
        noisy_epochs_ms(500.0), steps_per_epoch=50, samples_per_step=64, sample_unit="window", batch_size=64
    )
    section = replace(section, evaluation=EvaluationCost(ms_per_call=2.0, samples_per_call=64.0, calls_timed=32))
    plan = TrainingPlanConfig(eval_every_steps=10_000, checkpoint_every_steps=None, eval_fraction=0.25)
    estimate = estimate_training_time("tft", section, plan)
    assert estimate.plan_steps == pytest.approx(7_020_000 / 64)
    assert estimate.plan_updates == estimate.plan_steps
    assert estimate.updates_per_env_step is None
    # floor(109,687.5 / 10,000) = 10 passes of 0.25 x 140,400 windows / 64 per call x 2 ms = 5.484375 s.
    assert estimate.recurring.eval_passes == 10
    assert estimate.recurring.eval_pass_seconds == pytest.approx(0.25 * 140_400 / 64 * 2.0 / 1e3)
    assert "= 7,020,000 windows = 109,688 steps of batch 64; 10 validation passes" in estimate.plan_basis


def test_batch_what_ifs_give_the_plan_at_every_searched_batch() -> None:
    # The configured 64 is timed; the curve holds every size the search fitted (64 .. 1,024).
    search = batch_search(64, largest_fitting_size=1024, knee_size=512, peak_limit_mb=3600.0)
    curve = [ThroughputPoint(size=t.size, samples_per_s=t.samples_per_s) for t in search.trials if t.samples_per_s]
    search = replace(search, policy="configured", configured_size=64, throughput_curve=curve)
    section = model_section(
        noisy_epochs_ms(500.0),
        steps_per_epoch=50,
        samples_per_step=64,
        sample_unit="window",
        batch_search=search,
        batch_size=64,
    )
    estimate = estimate_training_time("tft", section, TrainingPlanConfig())
    by_size = {w.batch_size: w for w in estimate.what_ifs}
    assert set(by_size) == {p.size for p in search.throughput_curve}
    for point in search.throughput_curve:
        assert by_size[point.size].plan_hours == pytest.approx(7_020_000 / point.samples_per_s / 3600)
    assert by_size[512].label == "knee" and by_size[1024].label == "largest fitting"
    record = estimate.model_estimate(decided_on=False, step_split=None, energy_kwh=None, energy_basis=None)
    lines = plan_lines({"tft": record})
    assert lines[0].startswith("tft plan: 360 days x 390 bars")
    assert any(line.startswith("  what-if: at batch 512 (knee) the plan's steps take") for line in lines)


def test_no_batch_what_ifs_where_the_batch_is_the_algorithms_own() -> None:
    # PPO's minibatch: the same environment steps at minibatch 4,096 would make 64 x fewer updates than at 64, so
    # pricing the plan from the search's curve would price another training.
    search = batch_search(64, largest_fitting_size=1024, knee_size=512, peak_limit_mb=3600.0)
    curve = [ThroughputPoint(size=t.size, samples_per_s=t.samples_per_s) for t in search.trials if t.samples_per_s]
    search = replace(search, policy="configured", configured_size=64, throughput_curve=curve)
    section = model_section(
        noisy_epochs_ms(500.0), steps_per_epoch=50, samples_per_step=64, sample_unit="window", batch_size=64
    )
    recipe = replace(section, batch_search=search)
    algorithm = replace(section, batch_search=replace(search, batch_is_hyperparameter=True))
    assert estimate_training_time("tft", recipe, TrainingPlanConfig()).what_ifs
    assert estimate_training_time("tft", algorithm, TrainingPlanConfig()).what_ifs == ()


def test_recurring_keys_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"`decision.plan.eval_every_steps` = 0"):
        TrainingPlanConfig(eval_every_steps=0)
    with pytest.raises(ConfigError, match=r"`decision.plan.eval_fraction`"):
        TrainingPlanConfig(eval_fraction=0.0)


# ------------------------------------------------------------------------------------- measuring the recurring costs


class FakeClock:
    """A clock (s) that the fake work advances."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


class EvalWorkload(Workload):
    """A workload whose evaluate() takes 20 ms of fake time for 32 samples; one linear layer with Adam."""

    name = "fake"

    def __init__(self, clock: FakeClock, with_eval: bool = True) -> None:
        self.clock = clock
        self.with_eval = with_eval
        self.layer = torch.nn.Linear(10, 10)
        self.optimizer = torch.optim.Adam(self.layer.parameters())
        self.calls = 0

    @property
    def samples_per_step(self) -> float:
        return 32.0

    def train_step(self) -> StepResult:
        raise AssertionError("not trained here")

    def modules(self) -> list[torch.nn.Module]:
        return [self.layer]

    def optimizers(self) -> list[torch.optim.Optimizer]:
        return [self.optimizer]

    def evaluate(self) -> torch.Tensor | None:
        if not self.with_eval:
            return None
        self.calls += 1
        self.clock.now_s += 0.02
        return torch.zeros(())


def test_evaluation_is_timed_over_a_block_long_enough_for_the_clock() -> None:
    clock = FakeClock()
    workload = EvalWorkload(clock)
    cost = measure_evaluation(workload, BlockTimer(lambda: None, clock), min_seconds=0.05)
    # Warmup call, then blocks of 1 (0.02 s) and 2 (0.04 s) calls are too short; 4 calls take 0.08 s.
    assert cost == EvaluationCost(ms_per_call=pytest.approx(20.0), samples_per_call=32.0, calls_timed=4)
    assert workload.calls == 1 + 1 + 2 + 4
    assert measure_evaluation(EvalWorkload(clock, with_eval=False), BlockTimer(lambda: None, clock)) is None


def test_checkpoint_saves_model_and_optimizer_state(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    workload = EvalWorkload(clock)
    saved: list[Path] = []
    real_save = torch.save

    def timed_save(obj, path):
        clock.now_s += 0.1
        saved.append(Path(path))
        real_save(obj, path)
        assert set(torch.load(path)) == {"modules", "optimizers"}

    monkeypatch.setattr(torch, "save", timed_save)
    cost = measure_checkpoint(workload, BlockTimer(lambda: None, clock), repeats=2)
    assert cost.ms_per_save == pytest.approx(100.0)
    assert cost.saves_timed == 2 and len(saved) == 3  # one warmup save
    # 110 float32 parameters (weight and bias) are saved, in the temporary folder, which is gone afterwards.
    assert cost.size_mb > 110 * 4 / 2**20
    assert not saved[0].exists()


# ------------------------------------------------------------------------------------- the workloads' ratios


def test_dqn_and_ppo_defaults_follow_the_public_recipes_update_to_data_ratio(learnable_features) -> None:
    context = ExecutionContext(device=torch.device("cpu"), batch_size=32)
    env = TradingEnvConfig(num_envs=64, observation_window=8, episode_length=64)
    dqn = DQNWorkload(DQNConfig(env=env, buffer_size=2048, learning_starts=64), learnable_features, context)
    # SB3 / Nature DQN: one update per 4 env steps.
    assert dqn.updates_per_step / dqn.samples_per_step == 0.25
    ppo_config = PPOConfig(env=env)
    ppo = PPOWorkload(
        ppo_config, learnable_features, ExecutionContext(device=torch.device("cpu"), batch_size=ppo_config.batch_size)
    )
    # SB3 PPO: 10 epochs x 2,048 / 64 minibatches = 320 updates per 2,048 env steps.
    assert ppo.updates_per_step / ppo.samples_per_step == pytest.approx(320 / 2048)
    assert math.isclose(ppo.env.num_envs * ppo_config.num_steps, 2048)
    # Evaluation: one greedy step in each of the evaluation environments, which leaves training's state alone.
    bars_before = dqn.env.bar_index.clone()
    assert dqn.evaluate().shape == () and dqn.eval_samples_per_call == 64
    assert torch.equal(dqn.env.bar_index, bars_before)
    assert ppo.evaluate().shape == ()
