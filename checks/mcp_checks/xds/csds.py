"""CSDS (``envoy.service.status.v3.ClientStatusDiscoveryService``): a control plane's or an xDS
client's own account of each node's config, per resource, with ACK/NACK status and errors."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from mcp_checks.dialhooks import OPEN, DialHooks
from mcp_checks.xds.model import (
    STATE_RANK,
    TYPE_URLS,
    MalformedAnswer,
    ProxyReport,
    SourceAnswer,
    SyncState,
    TypeStatus,
    XdsSource,
)


@functools.cache
def messages() -> ModuleType:
    """envoy's CSDS messages, imported by the first xdsSync round that reads CSDS or syncz: their
    descriptors are 3.5 MB of resident memory that a gate without xdsSync never needs."""
    from envoy.service.status.v3 import csds_pb2

    return csds_pb2


@functools.cache
def _statuses() -> tuple[Any, Any]:
    """(ConfigStatus, ClientResourceStatus), imported with :func:`messages`."""
    from envoy.admin.v3 import config_dump_shared_pb2

    return messages().ConfigStatus, config_dump_shared_pb2.ClientResourceStatus


def _instant(stamp: Any) -> float | None:
    """A protobuf Timestamp as epoch seconds; None for the zero time (grpc-go sends Go's zero
    ``time.Time``, year 1, with a REQUESTED resource) or any instant before the epoch: unknown,
    not 63.9 billion seconds ago."""
    seconds = stamp.ToNanoseconds() / 1e9
    return seconds if seconds > 0 else None


def _resource_status(item: Any) -> TypeStatus | None:
    """One GenericXdsConfig -> its type's status; None for types the check does not judge."""
    xds_type = TYPE_URLS.get(item.type_url)
    if xds_type is None:
        return None
    since = _instant(item.last_updated) if item.HasField("last_updated") else None
    config, client = item.config_status, item.client_status
    _CONFIG, _CLIENT = _statuses()
    if client in (_CLIENT.NACKED, _CLIENT.RECEIVED_ERROR) or config == _CONFIG.ERROR:
        details = item.error_state.details or "NACKED without details"
        if item.error_state.HasField("last_update_attempt"):
            since = _instant(item.error_state.last_update_attempt) or since
        rejected = item.error_state.version_info or item.version_info  # the version it refused
        return TypeStatus(xds_type, SyncState.REJECTED, rejected, since, details)
    if client == _CLIENT.DOES_NOT_EXIST:
        return TypeStatus(xds_type, SyncState.UNKNOWN, item.version_info, since, "DOES_NOT_EXIST", True)
    if config == _CONFIG.STALE or client in (_CLIENT.REQUESTED, _CLIENT.TIMEOUT):
        status = _CLIENT.Name(client) if config != _CONFIG.STALE else "STALE"
        return TypeStatus(xds_type, SyncState.STALE, item.version_info, since, status)
    if config == _CONFIG.NOT_SENT:
        return TypeStatus(xds_type, SyncState.UNKNOWN, item.version_info, since, "NOT_SENT")
    if client == _CLIENT.ACKED or config == _CONFIG.SYNCED:
        return TypeStatus(xds_type, SyncState.SYNCED, item.version_info, since, "ACKED")
    return TypeStatus(xds_type, SyncState.UNKNOWN, item.version_info, since, "UNKNOWN")


def merge_types(statuses: Iterable[TypeStatus]) -> tuple[TypeStatus, ...]:
    """Many resources of one type -> one status: the worst, with every distinct rejection text."""
    by_type: dict[str, TypeStatus] = {}
    for status in statuses:
        held = by_type.get(status.xds_type)
        if held is None or STATE_RANK[status.state] > STATE_RANK[held.state]:
            by_type[status.xds_type] = status
        elif status.state == held.state == SyncState.REJECTED and status.detail not in held.detail:
            by_type[status.xds_type] = TypeStatus(
                held.xds_type, held.state, held.version, held.since, f"{held.detail}; {status.detail}"
            )
    return tuple(by_type[t] for t in sorted(by_type))


def proxy_from_client_config(config: Any) -> ProxyReport:
    node_id = config.node.id
    if not node_id:
        raise MalformedAnswer("a ClientConfig carries no node id")
    statuses = [s for s in map(_resource_status, config.generic_xds_configs) if s is not None]
    return ProxyReport(node_id, merge_types(statuses))


def parse_client_status(response: Any, source: str) -> SourceAnswer:
    """A ``ClientStatusResponse`` -> the answer; pure, so it is tested on built messages."""
    if not isinstance(response, messages().ClientStatusResponse):
        return SourceAnswer(source, malformed=f"not a ClientStatusResponse: {type(response).__name__}")
    try:
        proxies = tuple(proxy_from_client_config(c) for c in response.config)
    except MalformedAnswer as exc:
        return SourceAnswer(source, malformed=str(exc))
    return SourceAnswer(source, proxies)


FETCH_METHOD = "/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus"


def decode_client_status(raw: bytes, source: str) -> SourceAnswer:
    """The answer's bytes -> the answer; bytes that are no ``ClientStatusResponse`` say so (gRPC's
    own decoding would hand back None and leave the reason in its log)."""
    from google.protobuf.message import DecodeError

    try:
        response = messages().ClientStatusResponse.FromString(raw)
    except DecodeError as exc:
        return SourceAnswer(
            source,
            malformed=f"the answer is not a CSDS ClientStatusResponse: {len(raw):,} bytes that do not "
            f"decode ({exc})",
        )
    return parse_client_status(response, source)


async def fetch_csds(source: XdsSource, timeout_s: float, dial: DialHooks = OPEN) -> SourceAnswer:
    """One FetchClientStatus call over plaintext gRPC; a failed call names its status code. The
    channel dials the address ``dial`` checked (gRPC would resolve the name again itself). gRPC is
    imported here, by the first xdsSync round: 8 MB of resident memory the operator holds only once a gate
    asks a control plane."""
    import grpc

    address = await dial.grpc_address(source.address)
    # no grpc_proxy/http(s)_proxy: the policy judges the address dialled, not a proxy's
    options: list[tuple[str, str | int]] = [("grpc.enable_http_proxy", 0)]
    if address != source.address:
        options.append(("grpc.default_authority", source.address))
    csds_pb2 = messages()
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        fetch = channel.unary_unary(
            FETCH_METHOD, request_serializer=csds_pb2.ClientStatusRequest.SerializeToString
        )
        try:
            raw = await fetch(csds_pb2.ClientStatusRequest(), timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            return SourceAnswer(source.label, unreachable=f"{exc.code().name}: {exc.details()}")
    return decode_client_status(raw, source.label)
