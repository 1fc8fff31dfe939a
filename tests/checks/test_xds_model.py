"""An xDS source as the check shows it: its label and the errors its calls raise carry neither
userinfo nor a token in the query (a syncz ``?token=``, an Envoy admin ``?access_token=``, CSDS
``user:pw@host:port``), wherever they end up (source, subject, message, status)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from mcp_checks.xds import runner
from mcp_checks.xds.model import SourceAnswer, XdsSource, XdsSyncSpec
from mcp_checks.xds.runner import fetch_source, run_xds_sync

CANARY = "CANARY-04aa"
SOURCES = [
    XdsSource("syncz", f"http://istiod:15014/?token={CANARY}"),
    XdsSource("envoy_admin", f"http://pod:15000/?access_token={CANARY}"),
    XdsSource("csds", f"user:{CANARY}@istiod:15010"),
    XdsSource("csds", f"{CANARY}@istiod:15010"),
    XdsSource("syncz", f"http://u:{CANARY}@istiod:15014/?%74oken={CANARY}"),
]


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.address)
def test_a_label_carries_no_credential(source: XdsSource) -> None:
    assert CANARY not in source.label and source.label.startswith(f"{source.kind}:")


def test_a_clean_label_is_the_address() -> None:
    assert XdsSource("csds", "istiod:15010").label == "csds:istiod:15010"
    assert XdsSource("syncz", "http://istiod:15014").label == "syncz:http://istiod:15014"


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.address)
def test_an_error_quoting_the_address_is_scrubbed(source: XdsSource) -> None:
    raised = f"failed to connect to {source.address}/debug/syncz: connection refused"
    assert CANARY not in source.scrub(raised)
    assert "connection refused" in source.scrub(raised)


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.address)
async def test_no_credential_reaches_the_outcome(source: XdsSource, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a source's call raises, the answer and the check's outcome (source, findings,
    message) no longer quote the address's credentials."""

    async def failing(source: XdsSource, *_: Any) -> SourceAnswer:
        raise RuntimeError(f"cannot read {source.address}: refused")

    for name in ("fetch_csds", "fetch_syncz", "fetch_envoy_admin"):
        monkeypatch.setattr(runner, name, failing)
    async with aiohttp.ClientSession() as session:
        answer = await fetch_source(source, session, 1.0)
    assert answer.malformed and CANARY not in repr(answer)
    outcome = await run_xds_sync(XdsSyncSpec(sources=(source,), timeout_s=1.0))
    assert CANARY not in repr(outcome)
