"""The preflight's one reader: nodes, the namespace's ResourceQuotas and the shards' service account
from the API, and whether the target answers (with its fingerprint). A read the operator may not
make (403) is left out (``None``), never a finding."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from urllib.parse import urlsplit

from kubernetes.client.exceptions import ApiException

from mcp_bench.api import DialRefused, RunPlan, check_peer, protocol_factory

from .. import kube
from ..api.benchmark import MCPBenchmarkSpec
from ..redact import redact_text
from ..targets import SpecProblem
from ..targets.guarded import rule
from ..targets.policy import TargetPolicy
from .preflight import GPU, NodeView, Observed, QuotaView, Taint, findings

PROBE_TIMEOUT_S = 3.0
DEFAULT_PORTS = {"http": 80, "https": 443, "grpc": 80, "grpcs": 443}


def _node(item: Any) -> NodeView:
    allocatable = (item.status.allocatable if item.status else None) or {}
    try:
        gpus = int(allocatable.get(GPU, "0"))
    except ValueError:
        gpus = 0
    return NodeView(
        name=item.metadata.name,
        labels=dict(item.metadata.labels or {}),
        taints=tuple(Taint(t.key or "", t.value or "", t.effect or "") for t in (item.spec.taints or [])),
        gpus=gpus,
        unschedulable=bool(item.spec.unschedulable),
    )


async def _allowed(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """The API's answer, or None when the operator may not read it."""
    try:
        return await kube.call(fn, *args, **kwargs)
    except ApiException as exc:
        if exc.status == 403:
            return None
        raise


async def _nodes() -> list[NodeView] | None:
    nodes = await _allowed(kube.core().list_node)
    return None if nodes is None else [_node(n) for n in nodes.items]


async def _quotas(namespace: str) -> list[QuotaView] | None:
    quotas = await _allowed(kube.core().list_namespaced_resource_quota, namespace)
    if quotas is None:
        return None
    return [
        QuotaView(
            q.metadata.name,
            dict((q.spec.hard if q.spec else None) or {}),
            dict((q.status.used if q.status else None) or {}),
        )
        for q in quotas.items
    ]


async def _account_exists(namespace: str, name: str | None) -> bool | None:
    if not name:
        return None  # the operator creates the run's own
    try:
        await kube.call(kube.core().read_namespaced_service_account, name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        if exc.status == 403:
            return None
        raise
    return True


async def _connect_error(url: str) -> str | None:
    """None when something accepts a connection at the target's address, else why not."""
    parts = urlsplit(url if "//" in url else f"//{url}")
    host, scheme = parts.hostname, parts.scheme or "http"
    if not host:
        return f"no host in {redact_text(url)}"
    port = parts.port or DEFAULT_PORTS.get(scheme, 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), PROBE_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        return f"{host}:{port}: {type(exc).__name__}: {exc}".rstrip(": ")
    try:  # the address it reached, not the one admission resolved: closed before a byte is sent
        check_peer(rule(), writer.get_extra_info("peername"), host)
    except DialRefused as exc:
        return f"{host}:{port}: {exc}"
    finally:
        writer.close()
    return None


async def _fingerprint(plan: RunPlan) -> dict[str, str]:
    """Server name and version as the engine records them in results; empty when not told."""
    try:
        client = protocol_factory(plan.backend)(plan, 1)
    except Exception:
        return {}
    try:
        answer = await asyncio.wait_for(client.fingerprint(), PROBE_TIMEOUT_S)
    except Exception:
        return {}
    finally:
        with contextlib.suppress(Exception):
            await client.close()
    return {"serverName": answer.get("server_name", ""), "serverVersion": answer.get("server_version", "")}


async def _target(plan: RunPlan, policy: TargetPolicy) -> tuple[str | None, dict[str, str]]:
    """Why the target does not answer (None when it does), and its fingerprint. A cluster-only
    name that the operator, running outside the cluster, cannot resolve is not probed: the shards
    dial it from inside the cluster, and a finding (``TargetUnreachable``, a strict preflight's
    stop) would only say where the operator runs, not whether the shards reach the target."""
    host = urlsplit(plan.url if "//" in plan.url else f"//{plan.url}").hostname or ""
    if await policy.unresolvable(host) is not None:
        return None, {}
    target_error = await _connect_error(plan.url)
    return target_error, (await _fingerprint(plan) if target_error is None else {})


async def observe(
    spec: MCPBenchmarkSpec, plan: RunPlan, namespace: str, image: str, policy: TargetPolicy | None = None
) -> Observed:
    """Everything the preflight checks, read at once."""
    target_error, server = await _target(plan, policy or TargetPolicy.from_env())
    nodes, quotas, account = await asyncio.gather(
        _nodes(), _quotas(namespace), _account_exists(namespace, spec.runner.service_account_name)
    )
    return Observed(
        nodes=nodes,
        quotas=quotas,
        account_exists=account,
        image=image,
        target_error=None if target_error is None else redact_text(target_error),
        server=server,
    )


async def check(
    spec: MCPBenchmarkSpec, plan: RunPlan, namespace: str, image: str, policy: TargetPolicy | None = None
) -> tuple[list[SpecProblem], dict[str, str]]:
    """The findings and the target's fingerprint; none when spec.preflight is off."""
    if spec.preflight == "off":
        return [], {}
    seen = await observe(spec, plan, namespace, image, policy)
    return findings(spec, seen), dict(seen.server)
