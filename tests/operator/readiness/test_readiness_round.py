"""One round of a gate (``readiness.round.run_round``), the same for a new spec, a recheck and a
new release: what each trigger writes when it claims, what it announces, and a lost claim that
writes nothing. Against the in-memory API of ``fakekube``; the target is a Service that does not
exist, so the round's one row says so and no probe runs."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from envoy.admin.v3 import config_dump_shared_pb2 as shared
from envoy.service.status.v3 import csds_pb2, csds_pb2_grpc
from tests.operator.fakekube import EventLog, FakeKube, custom_kind

from mcp_checks.xds.model import TYPE_URLS
from mcp_operator.api import MCPReadinessSpec
from mcp_operator.api.common import API_VERSION, GROUP
from mcp_operator.api.readiness import KIND, PLURAL
from mcp_operator.api.readinessstatus import read_status
from mcp_operator.conditions import condition, set_condition
from mcp_operator.readiness.release import Trigger
from mcp_operator.readiness.round import (
    Gate,
    checked_target,
    ready_status,
    run_round,
    running_message,
    went_away,
)
from mcp_operator.readiness.runtime import Runtime
from mcp_operator.settings import OperatorSettings
from mcp_operator.targets import SpecProblem

NS, NAME = "serving", "gate"
CR = custom_kind(GROUP, PLURAL)
SPEC: dict[str, Any] = {
    "target": {"serviceRef": {"name": "gone", "port": 8000}},
    "checks": {"healthProbe": {"requests": 20, "minSuccessRatio": 0.9}},
}
READY = set_condition([], "Ready", True, "AllChecksPassed", "every check passed", 1, "2026-01-01T00:00:00Z")
DECIDED = {
    "phase": "Succeeded",
    "observedGeneration": 1,
    "targetUrl": "http://gone.serving.svc:8000",
    "completedAt": "2026-01-01T00:00:00Z",
    "conditions": READY,
}


@pytest.fixture
def rt() -> Runtime:
    return Runtime.from_settings(OperatorSettings.from_env())  # no probe runs: its pool stays unborn


def _gate(events: list[tuple[bool, str, str]]) -> Gate:
    return Gate(
        NS, NAME, "u-1", 1, lambda warning, reason, message: events.append((warning, reason, message))
    )


def _seed(kube: FakeKube, status: dict[str, Any]) -> dict[str, Any]:
    raw = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": NAME, "namespace": NS, "uid": "u-1", "generation": 1},
        "spec": SPEC,
        "status": status,
    }
    return kube.put(CR, raw)


def test_the_running_message_names_the_release_and_the_wait() -> None:
    assert running_message({"revision": None}) == "checks are running"
    assert running_message({"revision": "v2"}) == "evaluating release revision v2"
    message = running_message({"revision": "v2", "workloadTemplateHash": "abc", "workload": "Deployment/x"})
    assert message.startswith("evaluating release revision v2, template abc: waiting for the release")


def test_a_target_that_went_away_is_one_error_row_against_the_last_url() -> None:
    url, rows = checked_target(
        SpecProblem("TargetNotFound", "Service serving/gone does not exist"), read_status(DECIDED)
    )
    assert url == DECIDED["targetUrl"]
    assert rows is not None and [(r.name, r.outcome.value, r.reason) for r in rows] == [
        ("target", "Error", "TargetNotFound")
    ]
    assert checked_target("http://x:1", read_status(DECIDED)) == ("http://x:1", None)
    assert ready_status(read_status(DECIDED)) == "True" and ready_status(read_status({})) is None


@pytest.mark.parametrize(
    ("trigger", "progress", "announced"),
    [("Recheck", False, True), ("Watch", True, True)],
)
async def test_each_trigger_claims_and_decides_once(
    kube_fake: FakeKube,
    posted_events: EventLog,
    rt: Runtime,
    trigger: Trigger,
    progress: bool,
    announced: bool,
) -> None:
    """A recheck claims without touching Ready (no progress); a watch round shows Running and
    Ready Unknown while it runs. Either way the verdict is written once and, as Ready turned
    from True to False, announced."""
    obj = _seed(kube_fake, dict(DECIDED))
    events: list[tuple[bool, str, str]] = []
    assert await run_round(rt, _gate(events), obj, MCPReadinessSpec.model_validate(SPEC), trigger, None)
    claim, verdict = kube_fake.calls_to("patch", CR)
    claimed = claim.body["status"]
    assert claimed["release"]["trigger"] == trigger and claimed["evaluation"]["generation"] == 1
    assert ("phase" in claimed) is progress
    if progress:
        assert (condition(claimed["conditions"], "Ready") or {})["status"] == "Unknown"
    stored = (kube_fake.get(CR, NS, NAME) or {})["status"]
    assert stored["verdict"] == "Error" and stored["phase"] == "Failed"
    assert [c["reason"] for c in stored["checks"]] == ["TargetNotFound"]
    assert [(warning, reason) for warning, reason, _ in events] == [(True, "TargetNotFound")]
    assert rt.claims.running == set() and verdict.body["status"]["release"]["completedAt"]


async def test_a_quiet_recheck_whose_verdict_stands_posts_no_event(
    kube_fake: FakeKube, posted_events: EventLog, rt: Runtime
) -> None:
    not_ready = set_condition([], "Ready", False, "TargetNotFound", "gone", 1, "2026-01-01T00:00:00Z")
    obj = _seed(kube_fake, {**DECIDED, "phase": "Failed", "conditions": not_ready})
    events: list[tuple[bool, str, str]] = []
    assert await run_round(rt, _gate(events), obj, MCPReadinessSpec.model_validate(SPEC), "Recheck", None)
    assert events == []  # Ready was False and stays False: no news
    obj = _seed(kube_fake, {**DECIDED, "phase": "Failed", "conditions": not_ready})
    assert await run_round(rt, _gate(events), obj, MCPReadinessSpec.model_validate(SPEC), "Watch", None)
    assert [reason for _, reason, _ in events] == ["TargetNotFound"]  # every release is news


async def test_a_lost_claim_writes_nothing(kube_fake: FakeKube, posted_events: EventLog, rt: Runtime) -> None:
    obj = _seed(kube_fake, dict(DECIDED))
    kube_fake.refuse("patch", CR, 409)
    events: list[tuple[bool, str, str]] = []
    parsed = MCPReadinessSpec.model_validate(SPEC)
    assert not await run_round(rt, _gate(events), obj, parsed, "Watch", None)
    assert (kube_fake.get(CR, NS, NAME) or {})["status"] == DECIDED and events == []
    assert rt.claims.running == set()


async def test_a_gate_deleted_or_changed_while_evaluated_went_away(kube_fake: FakeKube) -> None:
    """A round whose verdict write fails because the gate was deleted (404) is no failure of the
    round: nothing is logged as an error and nothing is retried (found by the generated specs)."""
    gate = _gate([])
    assert await went_away(gate)  # never created, or deleted
    obj = _seed(kube_fake, dict(DECIDED))
    assert not await went_away(gate)
    kube_fake.put(CR, {**obj, "metadata": {**obj["metadata"], "generation": 2}})
    assert await went_away(gate)  # a newer spec: its own round follows


class _Csds(csds_pb2_grpc.ClientStatusDiscoveryServiceServicer):  # type: ignore[misc]
    def __init__(self, nodes: tuple[str, ...]) -> None:
        self.nodes = nodes

    async def FetchClientStatus(self, request: Any, context: Any) -> Any:
        answer = csds_pb2.ClientStatusResponse()
        for node in self.nodes:
            config = answer.config.add()
            config.node.id = node
            for url in TYPE_URLS:
                config.generic_xds_configs.add(
                    type_url=url, version_info="v1", config_status=csds_pb2.SYNCED, client_status=shared.ACKED
                )
        return answer


async def test_what_the_xds_check_saw_survives_a_restart_in_status(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    """Two proxies synced, then one gone: a new operator process (a restart, a new leader) reads
    what the last round saw from status and says the proxy disappeared, instead of judging the
    control plane's shorter list as if it were the first look."""
    servicer = _Csds(("a.serving", "b.serving"))
    server = grpc.aio.server()
    csds_pb2_grpc.add_ClientStatusDiscoveryServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    spec = {
        "target": {"url": "http://127.0.0.1:9"},
        "checks": {
            "healthProbe": {"enabled": False},
            "xdsSync": {"sources": [{"kind": "csds", "address": f"127.0.0.1:{port}"}], "minProxies": 1},
        },
    }
    try:
        obj = kube_fake.put(CR, {**_seed(kube_fake, {}), "spec": spec})
        first = Runtime.from_settings(OperatorSettings.from_env())
        assert await run_round(first, _gate([]), obj, MCPReadinessSpec.model_validate(spec), "Spec", None)
        stored = (kube_fake.get(CR, NS, NAME) or {})["status"]
        assert stored["verdict"] == "Pass", stored["checks"]
        assert {p["nodeId"] for p in stored["xdsMemory"]["proxiesSeen"]} == {"a.serving", "b.serving"}
        servicer.nodes = ("a.serving",)
        restarted = Runtime.from_settings(OperatorSettings.from_env())
        obj = kube_fake.get(CR, NS, NAME) or {}
        parsed = MCPReadinessSpec.model_validate(spec)
        assert await run_round(restarted, _gate([]), obj, parsed, "Recheck", None)
        row = (kube_fake.get(CR, NS, NAME) or {})["status"]["checks"][0]
        assert (row["verdict"], row["reason"]) == ("Fail", "ProxyDisappeared"), row
        assert row["findings"][0]["subject"] == "b.serving"
    finally:
        await server.stop(None)
