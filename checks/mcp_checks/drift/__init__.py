"""Recording-rule drift: a rule's recorded series against an independent expression (the rule's
own ``expr``, or its definition in a reference: PrometheusRule objects, a rules file), per label
set, within a relative threshold (0.3% by default); with a reference, also whether Prometheus
has loaded the rule as the reference defines it."""

from .compare import (
    Judged,
    SeriesDrift,
    assess_rule,
    compare,
    judge,
    reaches,
    relative_drift,
    series_verdict,
    worst_per_series,
)
from .loaded import LoadedRule, loaded_rules
from .normalise import Normaliser, whitespace_normalised
from .prom import RuleDefinition
from .reference import (
    ConfigMapRules,
    PrometheusRuleObjects,
    ReferenceNotFound,
    ReferenceNotIndependent,
    ReferenceUnreadable,
    RuleReference,
    RulesFile,
)
from .rulefile import ExpectedRule, ReferenceMalformed, parse_groups, parse_rules_text
from .run import CHECK_NAME, redact, run_metric_drift
from .spec import DEFAULT_THRESHOLD, MetricDriftSpec, RecordingRule
from .vector import MalformedAnswer, label_key, parse_vector
from .verify import verify_loaded

__all__ = [
    "CHECK_NAME",
    "DEFAULT_THRESHOLD",
    "ConfigMapRules",
    "ExpectedRule",
    "Judged",
    "LoadedRule",
    "MalformedAnswer",
    "MetricDriftSpec",
    "Normaliser",
    "PrometheusRuleObjects",
    "RecordingRule",
    "ReferenceMalformed",
    "ReferenceNotFound",
    "ReferenceNotIndependent",
    "ReferenceUnreadable",
    "RuleDefinition",
    "RuleReference",
    "RulesFile",
    "SeriesDrift",
    "assess_rule",
    "compare",
    "judge",
    "label_key",
    "loaded_rules",
    "parse_groups",
    "parse_rules_text",
    "parse_vector",
    "reaches",
    "redact",
    "relative_drift",
    "run_metric_drift",
    "series_verdict",
    "verify_loaded",
    "whitespace_normalised",
    "worst_per_series",
]
