"""etcdLeaderMove: move etcd's leadership to another member (etcd's MoveLeader, through its
JSON gateway), the control-plane fault of the reference drill: while the members elect the new
leader, the API server cannot write. The drill measures how long writes failed
(``drill.writeprobe``).

Off unless the operator is given etcd's client URLs in ``MCP_ETCD_ENDPOINTS`` (comma-separated,
plain http: test clusters only): a resource's author can never point the operator at an etcd,
and a cluster whose admin did not opt in refuses the fault (ControlPlaneFaultsDisabled). The
namespace opt-in applies as for every fault.

Undo data: ``{"endpoints", "from": the leader's member ID, "fromName", "to", "toName",
"namespace", "configMap"}`` (the drill's write-probe ConfigMap). Revert deletes the probe and
moves the leadership back to ``from`` when it is still a member and not the leader already.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes.client.exceptions import ApiException

from ... import kube
from ...api.drill import FaultPolicy, FaultSpec
from .base import Apis, FaultRefused, PlannedFault, undo_field

KIND = "etcdLeaderMove"
ENDPOINTS_ENV = "MCP_ETCD_ENDPOINTS"
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Member:
    id: str
    name: str
    client_urls: tuple[str, ...]


class EtcdError(RuntimeError):
    pass


def configured_endpoints() -> list[str]:
    raw = os.environ.get(ENDPOINTS_ENV, "")
    return [e.strip().rstrip("/") for e in raw.split(",") if e.strip()]


async def _post(session: aiohttp.ClientSession, endpoint: str, path: str, body: dict[str, Any]) -> Any:
    async with session.post(endpoint + path, json=body) as resp:
        data = await resp.json(content_type=None)
        if resp.status != 200 or (isinstance(data, dict) and data.get("code")):
            message = data.get("message") if isinstance(data, dict) else data
            raise EtcdError(f"{endpoint}{path}: {resp.status} {message}")
        return data


async def cluster_view(endpoints: list[str]) -> tuple[str, list[Member]]:
    """The leader's member ID and the voting members, from the first endpoint that answers."""
    errors = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session:
        for endpoint in endpoints:
            try:
                status = await _post(session, endpoint, "/v3/maintenance/status", {})
                listed = await _post(session, endpoint, "/v3/cluster/member/list", {})
            except (aiohttp.ClientError, TimeoutError, EtcdError, ValueError) as exc:
                errors.append(f"{endpoint}: {type(exc).__name__}: {exc}")
                continue
            members = [
                Member(str(m["ID"]), str(m.get("name", "")), tuple(m.get("clientURLs") or ()))
                for m in listed.get("members", [])
                if not m.get("isLearner")
            ]
            return str(status.get("leader", "")), members
    raise EtcdError("no etcd endpoint answered: " + "; ".join(errors))


async def move_leader(endpoints: list[str], to: str) -> tuple[str, float]:
    """Ask the current leader to hand over to ``to``; returns the former leader and the seconds
    the call took (a no-op when ``to`` leads already)."""
    leader, members = await cluster_view(endpoints)
    if leader == to:
        return leader, 0.0
    current = next((m for m in members if m.id == leader), None)
    if current is None or not current.client_urls:
        raise EtcdError(f"the leader {leader} is not a member with a client URL")
    started = time.monotonic()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as session:
        await _post(session, current.client_urls[0], "/v3/maintenance/transfer-leadership", {"targetID": to})
    return leader, time.monotonic() - started


async def plan(fault: FaultSpec, namespace: str, policy: FaultPolicy, apis: Apis) -> PlannedFault:
    endpoints = configured_endpoints()
    if not endpoints:
        raise FaultRefused(
            "ControlPlaneFaultsDisabled",
            f"etcdLeaderMove needs etcd's client URLs in the operator's {ENDPOINTS_ENV}: control-plane "
            "faults are off unless the cluster's admin starts the operator with them (test clusters only)",
        )
    try:
        leader, members = await cluster_view(endpoints)
    except EtcdError as exc:
        raise FaultRefused("EtcdUnreachable", str(exc)) from exc
    current = next((m for m in members if m.id == leader), None)
    others = sorted((m for m in members if m.id != leader), key=lambda m: m.name)
    if current is None or not others:
        raise FaultRefused(
            "SingleMemberEtcd",
            f"etcd has {len(members)} voting member(s) and leader {leader or 'none'}: a leader can only "
            "move between at least two members",
        )
    to = others[0]
    undo = {
        "endpoints": endpoints,
        "from": current.id,
        "fromName": current.name,
        "to": to.id,
        "toName": to.name,
        "namespace": namespace,
        "configMap": f"mcp-write-probe-{uuid.uuid4().hex[:8]}",
    }
    return PlannedFault(KIND, f"etcd leader {current.name} to {to.name}", undo)


async def inject(undo: dict[str, Any], apis: Apis) -> str:
    endpoints = undo_field(undo, "endpoints", list)
    to, to_name = undo_field(undo, "to", str), undo_field(undo, "toName", str)
    former, took = await move_leader(endpoints, to)
    leader, _ = await cluster_view(endpoints)
    return f"moved etcd leadership from {former} to {to_name} ({to}) in {took:.3f} s; leader now {leader}"


async def revert(undo: dict[str, Any], apis: Apis) -> str:
    parts = []
    namespace, probe = undo_field(undo, "namespace", str), undo_field(undo, "configMap", str)
    try:
        await kube.call(apis.core.delete_namespaced_config_map, probe, namespace)
        parts.append(f"deleted the write probe ConfigMap {namespace}/{probe}")
    except ApiException as exc:
        if exc.status != 404:
            raise
    endpoints = undo_field(undo, "endpoints", list)
    back, name = undo_field(undo, "from", str), undo_field(undo, "fromName", str)
    leader, members = await cluster_view(endpoints)
    if leader == back:
        parts.append(f"etcd leader is {name} as before")
    elif all(m.id != back for m in members):
        parts.append(f"etcd member {name} is gone; leader stays {leader}")
    else:
        await move_leader(endpoints, back)
        parts.append(f"moved etcd leadership back to {name}")
    return "; ".join(parts)
