"""The report's schema as typed records: the only module that knows the report's keys.

Every section of ``report.json`` is a dataclass here (codec: :mod:`gpubench.results.codec`) and every key a field
name or a figure listed in ``_DERIVED``, so a renamed field fails loudly: :meth:`Record.from_dict` rejects an unknown
key and a reader fails at the attribute. The seed tool's keys are kept exactly, and every timing figure is computed
over exactly ``raw_epoch_times_ms``. Pure Python: no torch.
"""

from gpubench.results.batch_search import BatchSearchResult, BatchStepDown, BatchTrial, ThroughputPoint
from gpubench.results.codec import Record, ReportFormatError
from gpubench.results.cost import (
    ALL_GPUS_PAID,
    CostAnalysis,
    CostRow,
    LocalCost,
    PriceSnapshotInfo,
    cheapest_rental,
    fitting_rentals,
)
from gpubench.results.device import (
    CheckpointCost,
    DeviceEpoch,
    EnergySummary,
    EvaluationCost,
    ExecutionSettings,
    Throughput,
)
from gpubench.results.memory import PEAK_DEFINITIONS, LeakEstimate, MemoryProfile, MemorySplit, MemoryTimeline
from gpubench.results.model import STATUSES, DistributedScaling, HostProbe, MeasuredRound, ModelResult, ModelStatus
from gpubench.results.recommendation import (
    CLOUD_GPU_RECOMMENDED,
    DECISION_BASES,
    GRAY_ZONE,
    LOCAL_GPU_VIABLE,
    BatchWhatIf,
    CardProjection,
    DecisionBasis,
    MemoryBudgetRow,
    MissingModel,
    ModelEstimate,
    ProjectedModel,
    Recommendation,
    ScalingEfficiency,
    StepSplit,
    WhatIfEstimate,
    recommendation_method,
    recommendation_thresholds,
)
from gpubench.results.report import REPORT_SCHEMA_VERSION, RunReport, RunStatus
from gpubench.results.run import (
    PRESET_NOTES,
    DataProvenance,
    HardwareReport,
    HostLoad,
    RunInfo,
    WarmupStats,
    preset_choice,
)
from gpubench.results.stability import RLHealth, StabilityReport
from gpubench.results.statistics import EpochTimeStatistics, RoundStatistics
from gpubench.results.validation import ValidationCheck, ValidationReport
from gpubench.results.what_if import WhatIf

__all__ = [
    "ALL_GPUS_PAID",
    "CLOUD_GPU_RECOMMENDED",
    "DECISION_BASES",
    "GRAY_ZONE",
    "LOCAL_GPU_VIABLE",
    "PEAK_DEFINITIONS",
    "PRESET_NOTES",
    "REPORT_SCHEMA_VERSION",
    "STATUSES",
    "BatchSearchResult",
    "BatchStepDown",
    "BatchTrial",
    "BatchWhatIf",
    "CardProjection",
    "CheckpointCost",
    "CostAnalysis",
    "CostRow",
    "DataProvenance",
    "DecisionBasis",
    "DeviceEpoch",
    "DistributedScaling",
    "EnergySummary",
    "EpochTimeStatistics",
    "EvaluationCost",
    "ExecutionSettings",
    "HardwareReport",
    "HostLoad",
    "HostProbe",
    "LeakEstimate",
    "LocalCost",
    "MeasuredRound",
    "MemoryBudgetRow",
    "MemoryProfile",
    "MemorySplit",
    "MemoryTimeline",
    "MissingModel",
    "ModelEstimate",
    "ModelResult",
    "ModelStatus",
    "PriceSnapshotInfo",
    "ProjectedModel",
    "RLHealth",
    "Recommendation",
    "Record",
    "ReportFormatError",
    "RoundStatistics",
    "RunInfo",
    "RunReport",
    "RunStatus",
    "ScalingEfficiency",
    "StabilityReport",
    "StepSplit",
    "Throughput",
    "ThroughputPoint",
    "ValidationCheck",
    "ValidationReport",
    "WarmupStats",
    "WhatIf",
    "WhatIfEstimate",
    "cheapest_rental",
    "fitting_rentals",
    "preset_choice",
    "recommendation_method",
    "recommendation_thresholds",
]
