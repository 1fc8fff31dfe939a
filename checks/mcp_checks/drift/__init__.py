"""Recording-rule drift: a rule's recorded series against the raw expression it records,
per label set, within a relative threshold (0.3% by default)."""

from .compare import (
    MalformedAnswer,
    SeriesDrift,
    assess_rule,
    compare,
    label_key,
    parse_vector,
    relative_drift,
    worst_per_series,
)
from .prom import RuleDefinition, rule_definitions
from .run import CHECK_NAME, redact, run_metric_drift
from .spec import DEFAULT_THRESHOLD, MetricDriftSpec, RecordingRule

__all__ = [
    "CHECK_NAME",
    "DEFAULT_THRESHOLD",
    "MalformedAnswer",
    "MetricDriftSpec",
    "RecordingRule",
    "RuleDefinition",
    "SeriesDrift",
    "assess_rule",
    "compare",
    "label_key",
    "parse_vector",
    "redact",
    "relative_drift",
    "rule_definitions",
    "run_metric_drift",
    "worst_per_series",
]
