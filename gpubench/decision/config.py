"""The ``decision`` group: thresholds, the training plan, VRAM budgets and prices."""

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from gpubench.errors import require, require_choice, require_positive
from gpubench.models import KNOWN_MODELS, MODELS

#: The alternatives a what-if can measure: bf16 autocast, tf32 matmuls (``execution.matmul_precision=high``),
#: ``torch.compile`` in its default and ``reduce-overhead`` modes, and the knee of the batch search's throughput curve.
WHAT_IF_VARIANTS: tuple[str, ...] = ("bf16", "tf32", "compile", "reduce-overhead", "knee")
#: The variants measured by default: those that cost seconds. The compile modes cost a compilation each (tens of
#: seconds a model on an H200), which would more than double the default four-model run; they are one key away.
DEFAULT_WHAT_IF_VARIANTS: tuple[str, ...] = ("bf16", "tf32", "knee")


@dataclass
class TrainingPlanConfig:
    """The full training each model's time is extrapolated to, in samples (see ``gpubench/decision/``).

    Supervised models (sample unit ``window``) train ``passes[model]`` passes over a dataset of
    ``trading_days × bars_per_day × symbols`` windows (one window ends at every one-minute bar). The default is the
    seed's dataset: 360 trading days of 390 one-minute bars (a US equity session) of one symbol, 50 passes.
    RL models (unit ``env_step``) train ``env_steps[model]`` environment steps. The defaults are each model's entry
    in :data:`gpubench.models.MODELS`. ``samples[model]``, for any model, is its full training in the model's own
    sample unit and takes precedence over the two above when set (null by default): the plan of the user's
    ``model=custom``, or a plan stated directly.

    Recurring costs, measured and added to the plan: a validation pass every ``eval_every_steps`` gradient updates
    (a supervised pass covers ``eval_fraction`` of one pass's windows: 0.25 is the validation fifth of an 80/20
    split against its training four fifths; an RL evaluation is ``eval_env_steps`` greedy environment steps, five
    episodes of the default 1,024 steps as Stable-Baselines3's EvalCallback runs five), and a checkpoint of model
    and optimizer every ``checkpoint_every_steps`` updates. Null turns either off.
    """

    trading_days: int = 360
    bars_per_day: int = 390
    symbols: int = 1
    passes: dict[str, float] = field(
        default_factory=lambda: {spec.name: spec.plan_passes for spec in MODELS if spec.plan_passes is not None}
    )
    env_steps: dict[str, float] = field(
        default_factory=lambda: {spec.name: spec.plan_env_steps for spec in MODELS if spec.plan_env_steps is not None}
    )
    eval_every_steps: int | None = 10_000
    checkpoint_every_steps: int | None = 50_000
    eval_fraction: float = 0.25
    eval_env_steps: float = 5_120
    # Every model has an entry (null: none), so that `decision.plan.samples.<model>=N` overrides an existing key.
    samples: dict[str, float | None] = field(default_factory=lambda: {spec.name: None for spec in MODELS})

    def __post_init__(self) -> None:
        for key in ("trading_days", "bars_per_day", "symbols"):
            require_positive(f"decision.plan.{key}", getattr(self, key))
        for group in ("passes", "env_steps", "samples"):
            for name, value in getattr(self, group).items():
                if value is not None:
                    require_positive(f"decision.plan.{group}.{name}", value)
        for key in ("eval_every_steps", "checkpoint_every_steps"):
            value = getattr(self, key)
            if value is not None:
                require(value >= 1, f"decision.plan.{key}", value, "a positive number of updates, or null (off)")
        require_positive("decision.plan.eval_fraction", self.eval_fraction)
        require_positive("decision.plan.eval_env_steps", self.eval_env_steps)

    @property
    def windows_per_pass(self) -> int:
        """Training windows in one pass over the dataset."""
        return self.trading_days * self.bars_per_day * self.symbols


@dataclass
class DecisionConfig:
    """The local-vs-cloud decision: thresholds on the upper bound of the estimated training time, the training
    plan, VRAM budgets, and the prices the cost analysis uses (see ``gpubench/decision/``).

    ``memory_budget_mb`` holds each model's VRAM target (MiB); the defaults sum to 3.3 GiB for the four seed models,
    under 85% of a 4 GiB card. ``local_hardware_cost_usd`` (null: no amortisation) is spread over
    ``amortisation_months``. ``cloud_card`` names the catalog card (``gpubench/conf/hardware/``) rented in the
    cloud, priced at its cheapest dated row of the price snapshot's cost table.
    ``cloud_gpus`` (an integer >= 1) is how many cards of each catalog card the cloud side rents for one training:
    its projected time is the one-card time's epochs divided by ``cloud_gpus`` × the data-parallel scaling
    efficiency (measured by ``distributed.nproc``, else stated as an assumption, see
    :mod:`gpubench.decision.scaling`), and its cost is the instance's dated price × those hours. The local
    card stays one card: the decision rule on the local time does not depend on it.
    ``assumed_matmul_efficiency`` is the fraction of a card's peak FLOP/s its matmuls reach, used by the projection
    only where the benchmark could not measure it (a source device that is not a catalog card).

    ``what_if`` measures successfully measured models again briefly in each of ``what_if_variants``: ``true`` every
    model, ``false`` none, null (the default) on a GPU only the critical models and only when the main measurements'
    answer is not LOCAL_GPU_VIABLE (a faster variant cannot change a local answer; see
    ``gpubench.bench.what_if.what_if_models``), never on the CPU. The variants (:data:`DEFAULT_WHAT_IF_VARIANTS`, any of
    :data:`WHAT_IF_VARIANTS`, e.g. ``decision.what_if_variants=[bf16,tf32,compile,reduce-overhead,knee]``; a variant
    equal to the main run is skipped) run after the main measurements: ``what_if_epochs`` epochs of at least
    ``what_if_epoch_seconds`` s after one warmup epoch, at the main run's batch (the knee variant at the knee), so the
    recommended actions quote measured figures. The default, 10 epochs of 0.1 s, costs each variant a few seconds
    beside its compilation.

    Renting (the cost table, :mod:`gpubench.decision.rent`): ``prices_dir`` is a price snapshot folder (null: the
    one shipped in ``gpubench/prices/catalog``); ``electricity_source`` and ``electricity_date`` (ISO, or null) say
    where ``electricity_usd_per_kwh`` comes from, shown beside the local cost in the report and the terminal. The
    default 0.1883 USD/kWh is the U.S. average residential retail price of April 2026 (EIA Electric Power Monthly, as
    its source names): a national average, not your tariff, so set all three to your own. Spot rows take
    ``spot_interruptions_per_hour`` (λ, per hour; 0.1 = one interruption per 10 h on average, an assumption, see
    ``spot_interruptions_source``) unless ``spot_interruptions_per_hour_by_provider`` names the provider; a
    training whose upper bound exceeds ``spot_max_hours_without_checkpoints`` (h) and whose plan has no
    checkpoints (``plan.checkpoint_every_steps`` null, or no measured checkpoint) gets no spot row.
    """

    local_max_hours: float = 24.0
    cloud_min_hours: float = 48.0
    #: The models whose combined time decides; empty: the models the job runs (the seed's dqn + ppo for the full
    #: four-model run), filled in when the job's config is built (``BenchmarkConfig``).
    critical_models: list[str] = field(default_factory=list)
    plan: TrainingPlanConfig = field(default_factory=TrainingPlanConfig)
    memory_budget_mb: dict[str, float] = field(
        default_factory=lambda: {
            spec.name: spec.memory_budget_mb for spec in MODELS if spec.memory_budget_mb is not None
        }
    )
    electricity_usd_per_kwh: float = 0.1883
    local_hardware_cost_usd: float | None = None
    amortisation_months: int = 36
    trainings_per_month: float = 4.0
    cloud_card: str = "h100"
    cloud_gpus: int = 1
    assumed_matmul_efficiency: float = 0.7
    what_if: bool | None = None
    what_if_variants: list[str] = field(default_factory=lambda: list(DEFAULT_WHAT_IF_VARIANTS))
    what_if_epochs: int = 10
    what_if_epoch_seconds: float = 0.1
    #: The default tariff's source: EIA's national residential average (a home workstation is the usual local
    #: machine) for the latest month the source transcribed; the date is the day that page was updated.
    electricity_source: str = (
        "U.S. average residential retail price, April 2026, 18.83 cents/kWh (EIA Electric Power Monthly, as "
        "transcribed by https://energyfactbook.com/): a national average, not your tariff; set "
        "decision.electricity_usd_per_kwh, decision.electricity_source and decision.electricity_date to your own"
    )
    electricity_date: str | None = "2026-07-05"
    prices_dir: str | None = None
    spot_interruptions_per_hour: float = 0.1
    spot_interruptions_source: str = (
        "an assumption (decision.spot_interruptions_per_hour), not a published rate: no dated per-hour interruption "
        "rate for GPU spot capacity was found; set it, or decision.spot_interruptions_per_hour_by_provider, from your "
        "provider's history"
    )
    spot_interruptions_per_hour_by_provider: dict[str, float] = field(default_factory=dict)
    spot_max_hours_without_checkpoints: float = 2.0

    def __post_init__(self) -> None:
        require_positive("decision.local_max_hours", self.local_max_hours)
        require(
            self.cloud_min_hours >= self.local_max_hours,
            "decision.cloud_min_hours",
            self.cloud_min_hours,
            f">= decision.local_max_hours ({self.local_max_hours})",
        )
        for name in self.critical_models:
            require_choice("decision.critical_models", name, KNOWN_MODELS)
        for name, budget_mb in self.memory_budget_mb.items():
            require_positive(f"decision.memory_budget_mb.{name}", budget_mb)
        require(
            self.electricity_usd_per_kwh >= 0,
            "decision.electricity_usd_per_kwh",
            self.electricity_usd_per_kwh,
            ">= 0",
        )
        if self.local_hardware_cost_usd is not None:
            require(
                self.local_hardware_cost_usd >= 0,
                "decision.local_hardware_cost_usd",
                self.local_hardware_cost_usd,
                ">= 0 or null (no amortisation)",
            )
        require_positive("decision.amortisation_months", self.amortisation_months)
        require_positive("decision.trainings_per_month", self.trainings_per_month)
        require(bool(self.cloud_card), "decision.cloud_card", self.cloud_card, "a catalog card name such as h100")
        require(
            isinstance(self.cloud_gpus, int) and not isinstance(self.cloud_gpus, bool) and self.cloud_gpus >= 1,
            "decision.cloud_gpus",
            self.cloud_gpus,
            "an integer >= 1 (the cards rented for one cloud training)",
        )
        require(
            0.0 < self.assumed_matmul_efficiency <= 1.0,
            "decision.assumed_matmul_efficiency",
            self.assumed_matmul_efficiency,
            "in (0, 1]",
        )
        for variant in self.what_if_variants:
            require_choice("decision.what_if_variants", variant, WHAT_IF_VARIANTS)
        require(self.what_if_epochs >= 2, "decision.what_if_epochs", self.what_if_epochs, "an integer >= 2")
        require_positive("decision.what_if_epoch_seconds", self.what_if_epoch_seconds)
        self._check_rent_keys()

    def _check_rent_keys(self) -> None:
        """The keys of the cost table (renting): dates, the price folder, the spot assumptions."""
        if self.electricity_date is not None:
            require(
                _is_iso_date(self.electricity_date),
                "decision.electricity_date",
                self.electricity_date,
                "an ISO date (YYYY-MM-DD) of the tariff, or null",
            )
        if self.prices_dir is not None:
            folder = Path(self.prices_dir).expanduser()
            require(
                (folder / "manifest.json").is_file(),
                "decision.prices_dir",
                self.prices_dir,
                "a folder holding a price snapshot (manifest.json and <provider>.csv, as `python -m gpubench.prices "
                "refresh --out DIR` writes), or null for the snapshot shipped with gpubench",
            )
        require_positive("decision.spot_interruptions_per_hour", self.spot_interruptions_per_hour)
        for provider, rate in self.spot_interruptions_per_hour_by_provider.items():
            require_positive(f"decision.spot_interruptions_per_hour_by_provider.{provider}", rate)
        require_positive("decision.spot_max_hours_without_checkpoints", self.spot_max_hours_without_checkpoints)

    def spot_rate(self, provider: str) -> tuple[float, str]:
        """The interruption rate (per hour) used for ``provider``'s spot capacity, and its source in words."""
        if provider in self.spot_interruptions_per_hour_by_provider:
            rate = self.spot_interruptions_per_hour_by_provider[provider]
            return rate, f"decision.spot_interruptions_per_hour_by_provider.{provider} = {rate:g}"
        return self.spot_interruptions_per_hour, self.spot_interruptions_source


def _is_iso_date(text: str) -> bool:
    try:
        date.fromisoformat(str(text))
    except ValueError:
        return False
    return True
