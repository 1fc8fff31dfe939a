"""A deleted gate whose journal shows a fault still open is held by the finalizer and goes through
the revert, whatever its spec says now: before, removing ``spec.drill`` after a revert failed
made kopf drop its finalizer, and deleting the gate then left the Deployment scaled down with no
``FaultsAbandoned`` event.

kopf keeps its finalizer on an object while a deletion handler matches it; that match is read
here from kopf's own registry (the handler's ``when`` filter, called with the object as kopf
calls it), and the handler itself runs against the in-memory API."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

import kopf
import pytest
from tests.operator.fakekube import EventLog, FakeKube, custom_kind

from mcp_operator.api.common import API_VERSION, GROUP
from mcp_operator.api.readiness import KIND, PLURAL
from mcp_operator.handlers import drills as handlers
from mcp_operator.readiness.drill.journal import RELEASE_ANNOTATION
from mcp_operator.readiness.faults import base

NS, NAME = "serving", "undrilled"
CR = custom_kind(GROUP, PLURAL)
Handler = Callable[..., Awaitable[None]]
revert_on_delete = cast(Handler, handlers.revert_on_delete)
SPEC_WITHOUT_DRILL = {"target": {"url": "http://127.0.0.1:9"}, "checks": {"healthProbe": {"requests": 20}}}
UNDO = {"namespace": NS, "workload": "srv", "replicas": 3, "to": 1}


def _fault(phase: str) -> dict[str, Any]:
    return {
        "id": "mixed-0",
        "stage": "mixed",
        "kind": "scaleDown",
        "target": f"Deployment {NS}/srv (3 to 1 replicas)",
        "phase": phase,
        "undo": json.dumps(UNDO, sort_keys=True),
        "plannedAt": "2026-03-01T12:00:00Z",
    }


def _raw(
    spec: dict[str, Any], faults: list[dict[str, Any]], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": NAME, "namespace": NS, "uid": "d3l3t3d", "generation": 2}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": meta,
        "spec": spec,
        "status": {"faults": faults},
    }


def _finalizer_kept(raw: dict[str, Any]) -> bool:
    """kopf's question before it removes its finalizer: does a deletion handler match?"""
    body = kopf.Body(cast(kopf.RawBody, raw))
    registry = kopf.get_default_registry()
    (handler,) = [h for h in registry._changing.get_all_handlers() if h.id == "revert_on_delete"]
    assert handler.requires_finalizer and handler.when is not None
    when = cast(Callable[..., Any], handler.when)  # kopf passes every kwarg; the filter reads these
    return bool(when(body=body, spec=body.spec, status=body.status, meta=body.meta))


@pytest.fixture
def deployment(kube_fake: FakeKube, monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    """The Deployment as the scaleDown left it (1 of 3 replicas); the faults reach the fake."""
    apis = base.Apis(kube_fake.core, kube_fake.apps, kube_fake.policy, kube_fake.authz)
    monkeypatch.setattr(base, "apis", lambda api: apis)
    kube_fake.put(
        "Deployment",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "srv", "namespace": NS},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "srv"}}, "template": {}},
        },
    )
    return kube_fake


def _replicas(kube: FakeKube) -> int:
    return int((kube.get("Deployment", NS, "srv") or {})["spec"]["replicas"])


@pytest.mark.parametrize("phase", ["Planned", "Injected", "RevertFailed"])
def test_an_open_fault_holds_the_finalizer_without_a_drill_in_the_spec(phase: str) -> None:
    assert _finalizer_kept(_raw(SPEC_WITHOUT_DRILL, [_fault(phase)]))


def test_nothing_open_and_no_drill_lets_the_gate_go() -> None:
    assert not _finalizer_kept(_raw(SPEC_WITHOUT_DRILL, []))
    assert not _finalizer_kept(_raw(SPEC_WITHOUT_DRILL, [_fault("Reverted"), _fault("Skipped")]))
    assert _finalizer_kept(_raw({**SPEC_WITHOUT_DRILL, "drill": {"profile": "MCP2026"}}, []))


async def _delete(kube: FakeKube, raw: dict[str, Any]) -> None:
    body = kopf.Body(cast(kopf.RawBody, kube.put(custom_kind(GROUP, PLURAL), raw)))
    await revert_on_delete(meta=body.meta, status=body.status, body=body)


async def test_the_delete_handler_reverts_a_fault_whose_drill_left_the_spec(
    deployment: FakeKube, posted_events: EventLog
) -> None:
    # the revert still refused: the gate is kept (kopf retries) and says why
    deployment.refuse("patch", "Scale", 403)
    with pytest.raises(kopf.TemporaryError, match="not reverted yet"):
        await _delete(deployment, _raw(SPEC_WITHOUT_DRILL, [_fault("RevertFailed")]))
    assert _replicas(deployment) == 1
    assert posted_events.reasons() == [("Warning", "RevertFailed")]
    # released by a person: let go, with the FaultsAbandoned event naming what is left
    released = _raw(SPEC_WITHOUT_DRILL, [_fault("RevertFailed")], {RELEASE_ANNOTATION: "true"})
    await _delete(deployment, released)
    assert posted_events.reasons()[-1] == ("Warning", "FaultsAbandoned")
    assert "scaleDown" in posted_events.events[-1].message and _replicas(deployment) == 1


async def test_the_delete_handler_restores_what_it_can(deployment: FakeKube, posted_events: EventLog) -> None:
    await _delete(deployment, _raw(SPEC_WITHOUT_DRILL, [_fault("RevertFailed")]))
    assert _replicas(deployment) == 3
    stored = deployment.get(CR, NS, NAME) or {}
    assert [f["phase"] for f in stored["status"]["faults"]] == ["Reverted"]
