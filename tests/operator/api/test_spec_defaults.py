"""One model per spec section: an API model derives from the engine's model of the same section
and declares none of its fields again, so each field's alias and default are written once.

``PAIRS`` lists (API model, engine model, fields the API declares again): a field declared again
adds only what the API server enforces (a pattern, credential rules) or takes the CRD's own type,
and keeps the engine's default (None for a retyped one: absent, the engine's default applies).
``BY_REFERENCE`` lists the API models that cannot derive (the inherited fields would come first
in the CRD): their fields read the engine's default, spelt the API's way.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from mcp_bench.multimodal import ImageParts, ImageTensor
from mcp_bench.plan import Consistency, Levels, Observe, RequestClass, Retry, RunPlan, ShapeSweep, Stage
from mcp_bench.saturation import SearchSpec
from mcp_bench.workload import DatasetWorkload
from mcp_checks import specs, status
from mcp_operator.api import common, readinesschecks
from mcp_operator.api.benchmark import BenchmarkTarget
from mcp_operator.api.classes import RequestClassSpec, ShapeSweepSpec
from mcp_operator.api.consistency import ConsistencySpec
from mcp_operator.api.drill import FaultSpec, TrafficClass
from mcp_operator.api.drillmeasures import LoadRetry
from mcp_operator.api.load import BenchmarkLoad
from mcp_operator.api.observe import BenchmarkObserve
from mcp_operator.api.readiness import WatchedApplication
from mcp_operator.api.readinessstatus import (
    CheckResult,
    Finding,
    MCPReadinessStatus,
    ReleaseRecord,
    RetryRecord,
)
from mcp_operator.api.search import BenchmarkSearch
from mcp_operator.api.workload import DatasetSpec, ImagePartsSpec, ImageTensorSpec

Model = type[BaseModel]

PAIRS: list[tuple[Model, Model, frozenset[str]]] = [
    (BenchmarkSearch, SearchSpec, frozenset()),
    (ConsistencySpec, Consistency, frozenset()),
    (ImageTensorSpec, ImageTensor, frozenset()),
    (ImagePartsSpec, ImageParts, frozenset({"count", "width", "height", "url_base"})),
    (ShapeSweepSpec, ShapeSweep, frozenset({"input_tokens"})),
    (readinesschecks.HealthProbeCheck, specs.HealthProbe, frozenset({"path"})),
    (readinesschecks.XdsSyncCheck, specs.XdsSync, frozenset({"proxies", "sources"})),
    (readinesschecks.XdsSourceRef, specs.XdsSourceRef, frozenset({"address"})),
    (readinesschecks.XdsProxies, specs.XdsProxies, frozenset()),
    (readinesschecks.ConfigConsistencyCheck, specs.ConfigConsistency, frozenset()),
    (readinesschecks.MetricDriftCheck, specs.MetricDrift, frozenset({"prometheus_url", "reference"})),
    (readinesschecks.PrometheusRulesRef, specs.PrometheusRulesRef, frozenset()),
    (readinesschecks.RuleReference, specs.RuleReference, frozenset({"prometheus_rules"})),
    (WatchedApplication, specs.ApplicationRef, frozenset()),
    (CheckResult, status.CheckRow, frozenset({"findings"})),
    (Finding, status.FindingRow, frozenset()),
    (ReleaseRecord, status.ReleaseRow, frozenset()),
    (RetryRecord, status.RetryRow, frozenset()),
    (common.Condition, status.ConditionRow, frozenset()),
    (
        MCPReadinessStatus,
        status.ReadinessStatusView,
        frozenset(
            {"checks", "conditions", "evaluation", "faults", "history", "kpis", "plan"}
            | {"release", "retry", "stages", "verdict_event", "xds_memory"}
        ),
    ),
]

# the smallest object of a section whose fields are not all optional
SAMPLES: dict[Model, dict[str, Any]] = {
    SearchSpec: {"floor": 1, "ceiling": 10},
    specs.ConfigConsistency: {"workload": {"name": "serve"}, "configMaps": ["serve-config"]},
    specs.ApplicationRef: {"name": "serve"},
    status.FindingRow: {"subject": "pod/a", "verdict": "Fail", "reason": "Stale", "observed": "v1"},
    status.ReleaseRow: {"trigger": "Spec", "generation": 1, "startedAt": "2026-12-06T00:00:00Z"},
    status.RetryRow: {"attempts": 1},
    status.ConditionRow: {
        "type": "Ready",
        "status": "True",
        "reason": "ChecksPassed",
        "lastTransitionTime": "2026-12-06T00:00:00Z",
    },
}

# (API model, engine model, {API field: engine field})
BY_REFERENCE: list[tuple[Model, Model, dict[str, str]]] = [
    (BenchmarkLoad, Levels, {"arrival": "arrival", "overload": "overload", "ramp_seconds": "ramp_s"}),
    (BenchmarkLoad, Stage, {"warmup_seconds": "warmup_s"}),
    (BenchmarkLoad, RunPlan, {"request_timeout_seconds": "request_timeout_s", "engine": "engine"}),
    (BenchmarkTarget, RunPlan, {"backend": "backend", "model": "model"}),
    (
        BenchmarkObserve,
        Observe,
        {"timeline_interval_seconds": "timeline_interval_s", "settle_seconds": "settle_s"},
    ),
    (RequestClassSpec, RequestClass, {"weight": "weight"}),
    (DatasetSpec, DatasetWorkload, {"default_max_tokens": "default_max_tokens"}),
    (TrafficClass, RequestClass, {"weight": "weight"}),
    (
        LoadRetry,
        Retry,
        {
            "attempts": "attempts",
            "backoff_ms": "backoff_ms",
            "max_backoff_ms": "max_backoff_ms",
            "jitter": "jitter",
        },
    ),
    (FaultSpec, specs.ConfigConsistency, {"annotation": "annotation"}),
]


def _default(model: Model, name: str) -> Any:
    return model.model_fields[name].get_default(call_default_factory=True)


def _by_alias(model: Model) -> dict[str, str]:
    """Wire name -> field name."""
    return {field.alias or to_camel(name): name for name, field in model.model_fields.items()}


def _declared(model: Model) -> set[str]:
    """Fields written in the class body itself, not inherited."""
    return set(vars(model).get("__annotations__", {})) & set(model.model_fields)


def _label(pair: tuple[Model, Model, object]) -> str:
    return f"{pair[0].__name__}-{pair[1].__name__}"


@pytest.mark.parametrize("pair", PAIRS, ids=_label)
def test_api_model_derives_from_the_engine_model(pair: tuple[Model, Model, frozenset[str]]) -> None:
    api, engine, again = pair
    assert issubclass(api, engine)
    assert _declared(api) & set(engine.model_fields) <= again
    assert again <= set(engine.model_fields)


@pytest.mark.parametrize("pair", PAIRS, ids=_label)
def test_fields_in_both_have_one_default(pair: tuple[Model, Model, frozenset[str]]) -> None:
    """A field with the same wire name in both has the same default (a field the API retypes
    is absent by default, so the engine's applies)."""
    api, engine, _ = pair
    api_names, engine_names = _by_alias(api), _by_alias(engine)
    assert set(engine_names) <= set(api_names), "the API model spells every engine field as the engine"
    for alias, name in engine_names.items():
        ours, theirs = _default(api, api_names[alias]), _default(engine, name)
        retyped = api.model_fields[api_names[alias]].annotation != engine.model_fields[name].annotation
        assert ours == theirs or (retyped and ours is None), f"{api.__name__}.{alias}: {ours!r} != {theirs!r}"


@pytest.mark.parametrize("pair", BY_REFERENCE, ids=_label)
def test_defaults_by_reference_are_the_engine_ones(pair: tuple[Model, Model, dict[str, str]]) -> None:
    api, engine, fields = pair
    for ours, theirs in fields.items():
        assert _default(api, ours) == _default(engine, theirs), f"{api.__name__}.{ours}"


def test_an_api_object_is_a_valid_engine_section() -> None:
    """The API model's object is the plan's section: its snake_case dump validates as the engine's."""
    for api, engine, again in PAIRS:
        if again:
            continue
        made = api.model_validate(SAMPLES.get(engine, {}))
        assert made.model_dump() == engine.model_validate(made.model_dump()).model_dump(), api.__name__


def test_the_api_spelling_and_the_plan_spelling_are_one_field() -> None:
    spec = ConsistencySpec.model_validate({"intervalSeconds": 2.5, "maxRounds": 3})
    assert spec.to_wire()["intervalSeconds"] == 2.5
    plan = Consistency.model_validate(spec.plan())
    assert (plan.interval_s, plan.max_rounds) == (2.5, 3)
