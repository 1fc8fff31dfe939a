"""The xDS sync check against a real xDS testbed: a go-control-plane control plane serving
snapshots over ADS (with its own CSDS) and three grpc-go xDS clients, each serving CSDS.
No Kubernetes API server is needed; the binary is built from the Go module proxy on first use.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_checks.verdict import Verdict
from mcp_checks.xds import XdsSource, XdsSyncSpec, measure_convergence, run_xds_sync
from mcp_devcluster.xdsbed import XdsBed

pytestmark = pytest.mark.e2e

NODES = ["node-a", "node-b", "node-c"]


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[XdsBed]:
    with XdsBed(tmp_path, list(NODES)) as testbed:
        yield testbed


def spec_for(bed: XdsBed, *, clients: bool = True, **kwargs: object) -> XdsSyncSpec:
    sources = [XdsSource("csds", bed.control_plane_csds)]
    if clients:
        sources += [XdsSource("csds", c.csds_address) for c in bed.clients.values()]
    return XdsSyncSpec(sources=tuple(sources), expected_proxies=tuple(NODES), timeout_s=3, **kwargs)  # type: ignore[arg-type]


async def converged(bed: XdsBed, version: str) -> float:
    result = await measure_convergence(spec_for(bed, expected_version=version), timeout_s=30)
    assert result.outcome.outcome == Verdict.PASS, result.outcome.message
    assert result.seconds is not None
    return result.seconds


async def test_all_synced_passes(bed: XdsBed) -> None:
    await converged(bed, "v1")
    outcome = await run_xds_sync(spec_for(bed, expected_version="v1"))
    assert outcome.outcome == Verdict.PASS, outcome.message
    assert outcome.reason == "ProxiesSynced"
    assert outcome.observed["synced"] == str(len(NODES) * 4)


async def test_a_snapshot_one_client_rejects_fails_with_its_error(bed: XdsBed) -> None:
    await converged(bed, "v1")
    await asyncio.to_thread(bed.set_snapshot, "v2", reject=("node-b",))
    result = await measure_convergence(spec_for(bed, expected_version="v2"), timeout_s=30)
    outcome = result.outcome
    assert result.seconds is None
    assert outcome.outcome == Verdict.FAIL, outcome.message
    assert outcome.reason == "ProxyNacked"
    assert "ChoiceCount must be >= 2" in outcome.message  # grpc-go's own validation error
    nacked = {f.subject for f in outcome.findings if f.reason == "ProxyNacked"}
    assert nacked == {"node-b/CDS"}
    assert all(f.source.startswith("csds:") for f in outcome.findings)


async def test_a_stopped_client_is_inconclusive_within_grace_then_fails_stale(bed: XdsBed) -> None:
    await converged(bed, "v1")
    await asyncio.to_thread(bed.stop_client, "node-c")
    grace = 3.0
    spec = spec_for(bed, grace_s=grace)
    deadline = time.monotonic() + 10
    outcome = await run_xds_sync(spec)
    # the client's own source goes silent at once; the control plane notices the closed stream
    while not any(f.reason == "ProxyStale" for f in outcome.findings) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        outcome = await run_xds_sync(spec)
    # within the grace: the control plane says node-c has not converged (stale), and node-c's
    # own CSDS no longer answers: both leave it unknown, Inconclusive, never Ready
    assert outcome.outcome == Verdict.INCONCLUSIVE, outcome.message
    (down,) = [f for f in outcome.findings if f.reason == "SourceUnreachable"]
    assert down.subject == f"csds:{bed.clients['node-c'].csds_address}"
    stale = [f for f in outcome.findings if f.reason == "ProxyStale"]
    assert stale and {f.subject.split("/")[0] for f in stale} == {"node-c"}
    assert {f.outcome for f in stale} == {Verdict.INCONCLUSIVE}
    await asyncio.sleep(grace + 0.5)
    later = await run_xds_sync(spec)
    assert later.outcome == Verdict.FAIL, later.message
    assert later.reason == "ProxyStale"
    assert "node-c/" in later.message


async def test_convergence_time_after_a_snapshot_change(bed: XdsBed) -> None:
    await converged(bed, "v1")
    started = time.monotonic()
    await asyncio.to_thread(bed.set_snapshot, "v2")
    result = await measure_convergence(spec_for(bed, expected_version="v2"), started=started, timeout_s=30)
    assert result.outcome.outcome == Verdict.PASS, result.outcome.message
    assert result.seconds is not None
    assert math.isfinite(result.seconds) and result.seconds > 0
    print(f"xDS convergence after a snapshot change: {result.seconds * 1000:.1f} ms ({result.polls} polls)")
