"""Recording-rule drift: a rule's recorded series against an independent expression (the rule's
own ``expr``, or its definition in a reference: PrometheusRule objects, a rules file), per label
set, within a relative threshold (0.3% by default); with a reference, also whether Prometheus
has loaded the rule as the reference defines it."""

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
from .loaded import LoadedRule, loaded_rules
from .normalise import Normaliser, whitespace_normalised
from .prom import RuleDefinition
from .reference import (
    ConfigMapRules,
    PrometheusRuleObjects,
    ReferenceNotFound,
    ReferenceUnreadable,
    RuleReference,
    RulesFile,
)
from .rulefile import ExpectedRule, ReferenceMalformed, parse_groups, parse_rules_text
from .run import CHECK_NAME, redact, run_metric_drift
from .spec import DEFAULT_THRESHOLD, MetricDriftSpec, RecordingRule
from .verify import verify_loaded

__all__ = [
    "CHECK_NAME",
    "DEFAULT_THRESHOLD",
    "ConfigMapRules",
    "ExpectedRule",
    "LoadedRule",
    "MalformedAnswer",
    "MetricDriftSpec",
    "Normaliser",
    "PrometheusRuleObjects",
    "RecordingRule",
    "ReferenceMalformed",
    "ReferenceNotFound",
    "ReferenceUnreadable",
    "RuleDefinition",
    "RuleReference",
    "RulesFile",
    "SeriesDrift",
    "assess_rule",
    "compare",
    "label_key",
    "loaded_rules",
    "parse_groups",
    "parse_rules_text",
    "parse_vector",
    "redact",
    "relative_drift",
    "run_metric_drift",
    "verify_loaded",
    "whitespace_normalised",
    "worst_per_series",
]
