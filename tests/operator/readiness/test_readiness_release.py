"""readiness.release: the watched fingerprint, when a rollout has settled, and the record of what
an evaluation judged; pure functions and the settle loop over small fake readers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcp_checks.verdict import Verdict
from mcp_operator.api.readiness import MCPReadinessSpec, ReleaseWatch
from mcp_operator.api.readinessstatus import read_status
from mcp_operator.readiness import release
from mcp_operator.readiness.release import (
    Abandoned,
    Observation,
    ReadError,
    Readers,
    observe,
    recorded_fingerprint,
    release_record,
    rollout_state,
    settle,
    template_hash,
)

NS = "serving"


MARKER = {"generation": 3, "id": "round-1", "instance": "op-1", "startedAt": "2026-05-01T12:00:00Z"}


def deployment(
    image: str = "srv:1",
    *,
    generation: int = 1,
    replicas: int = 2,
    updated: int = 2,
    available: int = 2,
    total: int = 2,
    observed: int | None = None,
    deadline: bool = False,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "observedGeneration": generation if observed is None else observed,
        "replicas": total,
        "updatedReplicas": updated,
        "availableReplicas": available,
    }
    if deadline:
        status["conditions"] = [
            {
                "type": "Progressing",
                "status": "False",
                "reason": "ProgressDeadlineExceeded",
                "message": 'ReplicaSet "web-7d9" has timed out progressing.',
            }
        ]
    return {
        "metadata": {"name": "web", "namespace": NS, "generation": generation},
        "spec": {
            "replicas": replicas,
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"image": image}]}},
        },
        "status": status,
    }


def app(revision: str, sync: str = "Synced") -> dict[str, Any]:
    return {"metadata": {"name": "shop"}, "status": {"sync": {"status": sync, "revision": revision}}}


class Script:
    """Readers that answer from lists, one entry per read (the last one repeats)."""

    def __init__(self, deployments: list[Any] | None = None, apps: list[Any] | None = None) -> None:
        self.deployments = deployments or [None]
        self.apps = apps or [None]
        self.reads = 0

    @staticmethod
    def _next(items: list[Any]) -> Any:
        item = items.pop(0) if len(items) > 1 else items[0]
        if isinstance(item, Exception):
            raise item
        return item

    async def deployment(self, namespace: str, name: str) -> Any:
        assert (namespace, name) == (NS, "web")
        self.reads += 1
        return self._next(self.deployments)

    async def application(self, namespace: str, name: str) -> Any:
        assert (namespace, name) == ("argocd", "shop")
        return self._next(self.apps)

    def readers(self) -> Readers:
        return Readers(self.deployment, self.application)


WORKLOAD = ReleaseWatch.model_validate({"workload": {"name": "web"}})
BOTH = ReleaseWatch.model_validate({"workload": {"name": "web"}, "application": {"name": "shop"}})


@pytest.fixture(autouse=True)
def _fast_poll(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(release, "POLL_S", 0.001)
    yield


async def _always() -> bool:
    return True


def test_template_hash_is_of_the_template_only_and_ignores_key_order() -> None:
    one = deployment("srv:1")
    assert template_hash(one) == template_hash(deployment("srv:1", generation=7, updated=0))
    assert template_hash(one) != template_hash(deployment("srv:2"))
    reordered = {"spec": {"template": dict(reversed(list(one["spec"]["template"].items())))}}
    assert template_hash(reordered) == template_hash(one)
    assert len(template_hash(one)) == 16


@pytest.mark.parametrize(
    ("dep", "state", "words"),
    [
        (deployment(), "Settled", "2 of 2 replicas run the current template"),
        (deployment(generation=3, observed=2), "Progressing", "not yet seen generation 3"),
        (deployment(updated=1, total=3), "Progressing", "1 of 2 replicas"),
        (deployment(total=3), "Progressing", "1 replicas of an older template"),
        (deployment(available=1), "Progressing", "1 of 2 updated replicas are available"),
        (deployment(updated=1, deadline=True), "Failed", "progress deadline"),
        (None, "Missing", "does not exist"),
    ],
)
def test_rollout_state(dep: dict[str, Any] | None, state: str, words: str) -> None:
    rollout = rollout_state(dep)
    assert rollout.state == state and words in rollout.message


async def test_the_fingerprint_follows_the_template_and_the_synced_revision() -> None:
    first = await observe(BOTH, NS, Script([deployment("srv:1")], [app("aaa")]).readers())
    same = await observe(BOTH, NS, Script([deployment("srv:1", updated=0)], [app("aaa")]).readers())
    image = await observe(BOTH, NS, Script([deployment("srv:2")], [app("aaa")]).readers())
    revision = await observe(BOTH, NS, Script([deployment("srv:1")], [app("bbb")]).readers())
    assert first.fingerprint == same.fingerprint  # progress of a rollout is not a new release
    assert len({first.fingerprint, image.fingerprint, revision.fingerprint}) == 3
    unreadable = await observe(
        BOTH, NS, Script([ReadError("Deployment serving/web: 403 Forbidden")]).readers()
    )
    assert unreadable.fingerprint is None and unreadable.error is not None


async def test_settle_waits_for_the_rollout_then_passes() -> None:
    script = Script(
        [deployment("srv:2", updated=1, total=3), deployment("srv:2", total=3), deployment("srv:2")]
    )
    observation, row = await settle(WORKLOAD, NS, script.readers(), _always)
    assert script.reads == 3
    assert (row.name, row.outcome, row.reason) == ("rollout", Verdict.PASS, "RolloutSettled")
    assert observation.template_hash == template_hash(deployment("srv:2"))
    assert row.observed["templateHash"] == observation.template_hash
    assert row.observed["replicas"] == "2/2 updated, 2 available, 2 total"


async def test_settle_fails_at_once_on_a_failed_rollout() -> None:
    script = Script([deployment(updated=1, total=3, deadline=True)])
    _, row = await settle(WORKLOAD, NS, script.readers(), _always)
    assert (row.outcome, row.reason) == (Verdict.FAIL, "RolloutFailed") and script.reads == 1
    assert "progress deadline" in row.message


async def test_settle_gives_up_after_its_timeout_as_inconclusive() -> None:
    watch = ReleaseWatch.model_validate({"workload": {"name": "web"}, "settleTimeoutSeconds": 0})
    _, row = await settle(watch, NS, Script([deployment(updated=1, total=3)]).readers(), _always)
    assert (row.outcome, row.reason) == (Verdict.INCONCLUSIVE, "RolloutNotSettled")
    assert "1 of 2 replicas" in row.message


@pytest.mark.parametrize(
    ("deployments", "apps", "reason"),
    [
        ([None], [app("aaa")], "WorkloadNotFound"),
        ([deployment()], [None], "ApplicationNotFound"),
        ([ReadError("Deployment serving/web: 403 Forbidden")], [app("aaa")], "WatchUnreadable"),
    ],
)
async def test_what_cannot_be_judged_is_inconclusive_at_once(
    deployments: list[Any], apps: list[Any], reason: str
) -> None:
    _, row = await settle(BOTH, NS, Script(deployments, apps).readers(), _always)
    assert (row.outcome, row.reason) == (Verdict.INCONCLUSIVE, reason)


async def test_settle_waits_for_the_application_to_be_synced() -> None:
    script = Script([deployment()], [app("bbb", "OutOfSync"), app("bbb")])
    observation, row = await settle(BOTH, NS, script.readers(), _always)
    assert row.outcome == Verdict.PASS and observation.application_revision == "bbb"
    assert "Application argocd/shop Synced at bbb" in row.message

    never = ReleaseWatch.model_validate({"application": {"name": "shop"}, "settleTimeoutSeconds": 0})
    _, row = await settle(never, NS, Script(apps=[app("bbb", "OutOfSync")]).readers(), _always)
    assert (row.outcome, row.reason) == (Verdict.INCONCLUSIVE, "ApplicationNotSynced")


async def test_settle_stops_when_the_gate_goes_away() -> None:
    async def gone() -> bool:
        return False

    with pytest.raises(Abandoned):
        await settle(WORKLOAD, NS, Script([deployment(updated=1, total=3)]).readers(), gone)


def test_release_record_revision_and_reset_keys() -> None:
    spec = MCPReadinessSpec.model_validate(
        {"target": {"url": "http://t"}, "release": "r7", "watch": {"application": {"name": "shop"}}}
    )
    observation = Observation(application="argocd/shop", application_found=True, application_revision="bbb")
    record = release_record(spec, observation, "Watch", 3, "2026-05-01T12:00:00.123Z")
    assert record["revision"] == "r7" and record["applicationRevision"] == "bbb"
    assert record["fingerprint"] == observation.fingerprint and record["trigger"] == "Watch"
    # keys without a value are sent as null, so a merge patch removes an earlier record's
    assert record["workload"] is None and record["completedAt"] is None
    unnamed = MCPReadinessSpec.model_validate({"target": {"url": "http://t"}})
    assert release_record(unnamed, observation, "Spec", 1, "t")["revision"] == "bbb"
    assert release_record(unnamed, None, "Spec", 1, "t")["revision"] is None
    assert recorded_fingerprint(read_status({"release": record})) == observation.fingerprint
    assert recorded_fingerprint(read_status({"evaluation": {**MARKER, "fingerprint": "abc"}})) == "abc"
    assert recorded_fingerprint(read_status({})) is None


def test_watch_and_drill_do_not_combine() -> None:
    with pytest.raises(ValueError, match="watch cannot be combined with drill"):
        MCPReadinessSpec.model_validate(
            {
                "target": {"url": "http://t"},
                "watch": {"workload": {"name": "web"}},
                "drill": {"profile": "MCP2026"},
            }
        )
    with pytest.raises(ValueError, match="at least one of workload and application"):
        ReleaseWatch.model_validate({})
