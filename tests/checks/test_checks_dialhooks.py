"""How the checks connect: ``mcp-check`` dials as told (no hooks); hooks injected by whoever runs
the checks (the operator: its target policy) reach every client, and a refusal is quoted in the
row without the URL it happened on."""

from __future__ import annotations

import errno

import pytest
import requests

from mcp_checks.dialhooks import OPEN, DialHooks
from mcp_checks.xds.csds import fetch_csds
from mcp_checks.xds.model import XdsSource

MARK = "refused by the target policy"


def test_a_refusal_is_quoted_from_whatever_wraps_it_and_nothing_else() -> None:
    hooks = DialHooks(refusal_mark=MARK)
    wrapped = requests.ConnectionError(
        "HTTPConnectionPool(host='10.0.0.1', port=9090): Max retries exceeded with url: "
        '/api/v1/query?query=up&token=s3cret (Caused by NewConnectionError("GuardedHTTPConnection('
        f"host='10.0.0.1', port=9090): [Errno 13] 10.0.0.1 is outside MCP_TARGET_ALLOW_CIDRS: {MARK}\"))"
    )
    assert hooks.refusal(wrapped) == f"10.0.0.1 is outside MCP_TARGET_ALLOW_CIDRS: {MARK}"
    assert hooks.refusal(OSError(errno.ECONNREFUSED, "Connection refused")) is None
    assert OPEN.refusal(wrapped) is None  # mcp-check has no policy to quote


async def test_a_csds_source_is_dialled_where_the_hook_says_or_not_at_all() -> None:
    asked: list[str] = []

    async def refuse(address: str) -> str:
        asked.append(address)
        raise OSError(errno.EACCES, f"xds.example resolves to 169.254.169.254, a link-local address: {MARK}")

    source = XdsSource("csds", "xds.example:18000")
    with pytest.raises(OSError, match=MARK):  # the runner turns it into the source's answer
        await fetch_csds(source, 1.0, DialHooks(grpc_target=refuse))
    assert asked == ["xds.example:18000"]
