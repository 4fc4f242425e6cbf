"""The ``decision`` group: thresholds, the training plan, VRAM budgets and prices."""

from dataclasses import dataclass, field
from datetime import date

from gpubench.errors import require, require_choice, require_positive
from gpubench.models import KNOWN_MODELS, MODELS
from gpubench.prices import user_snapshot

#: What a what-if can measure (``tf32``: matmul precision high; ``knee``: the batch search's knee).
WHAT_IF_VARIANTS: tuple[str, ...] = ("bf16", "tf32", "compile", "reduce-overhead", "knee")
#: The variants that cost seconds; the compile modes cost a compilation each.
DEFAULT_WHAT_IF_VARIANTS: tuple[str, ...] = ("bf16", "tf32", "knee")


@dataclass
class TrainingPlanConfig:
    """The full training each model's time is extrapolated to: supervised ``passes`` over ``trading_days ×
    bars_per_day × symbols`` windows, RL ``env_steps``, ``samples`` overriding both; validation and checkpoints
    every so many updates (null: off)."""

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
    # An entry per model, so that `decision.plan.samples.<model>=N` overrides an existing key.
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
    """The local-vs-cloud decision: thresholds (hours), the plan, VRAM budgets, prices, ``cloud_gpus`` cards of
    ``cloud_card`` (data-parallel), the what-ifs (``what_if`` null: on a GPU unless LOCAL) and the spot assumptions."""

    local_max_hours: float = 24.0
    cloud_min_hours: float = 48.0
    #: The models whose combined time decides; empty: the models the job runs.
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
    electricity_source: str = (
        "U.S. average residential retail price, April 2026, 18.83 cents/kWh (EIA Electric Power Monthly, as "
        "transcribed by https://energyfactbook.com/): a national average, not your tariff; set "
        "decision.electricity_usd_per_kwh, decision.electricity_source and decision.electricity_date to your own"
    )
    electricity_date: str | None = "2026-07-05"
    prices_dir: str | None = None
    #: None: the shipped trace's lifetimes; a rate (per hour): exponential lifetimes.
    spot_interruptions_per_hour: float | None = None
    #: The trace's instance family a spot row takes (None: its default).
    spot_lifetimes_family: str | None = None
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
            self.electricity_usd_per_kwh >= 0, "decision.electricity_usd_per_kwh", self.electricity_usd_per_kwh, ">= 0"
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
        """The renting keys: dates, the price folder, the spot assumptions."""
        if self.electricity_date is not None:
            require(
                _is_iso_date(self.electricity_date),
                "decision.electricity_date",
                self.electricity_date,
                "an ISO date (YYYY-MM-DD) of the tariff, or null",
            )
        if self.prices_dir is not None:
            # Read before anything is measured: an unreadable folder is bad input.
            user_snapshot(self.prices_dir)
        if self.spot_interruptions_per_hour is not None:
            require_positive("decision.spot_interruptions_per_hour", self.spot_interruptions_per_hour)
        for provider, rate in self.spot_interruptions_per_hour_by_provider.items():
            require_positive(f"decision.spot_interruptions_per_hour_by_provider.{provider}", rate)
        require_positive("decision.spot_max_hours_without_checkpoints", self.spot_max_hours_without_checkpoints)

    def spot_rate(self, provider: str) -> tuple[float | None, str | None]:
        """The interruption rate (per hour) set for ``provider`` and where, or (None, None): the trace applies."""
        if provider in self.spot_interruptions_per_hour_by_provider:
            rate = self.spot_interruptions_per_hour_by_provider[provider]
            return rate, f"decision.spot_interruptions_per_hour_by_provider.{provider} = {rate:g}"
        if self.spot_interruptions_per_hour is not None:
            return (
                self.spot_interruptions_per_hour,
                f"decision.spot_interruptions_per_hour = {self.spot_interruptions_per_hour:g}",
            )
        return None, None


def _is_iso_date(text: str) -> bool:
    try:
        date.fromisoformat(str(text))
    except ValueError:
        return False
    return True
