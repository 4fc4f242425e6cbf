"""The report's schema as typed records, the only module that knows the report's keys: every key is a field or a
``_DERIVED`` figure, so a renamed one fails loudly (:meth:`Record.from_dict` rejects unknown keys). No torch."""

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
