"""Accepted input, generated: hypothesis draws MCPReadiness and MCPBenchmark specs from the CRDs'
own schemas and CEL rules (``mcp_devcluster.specgen``), the real API server filters them (a
server-side dry run with strict field validation; the few it refuses are counted, and most must
pass or the run proves nothing), and what it accepts is applied for real, in batches, to the
shared operator. For every stored object:

- within :data:`JUDGED_WITHIN_S` of its create, ``Ready`` (or, for a gate created suspended,
  ``Accepted``) speaks for its generation with a CamelCase reason and a message: a verdict, a
  refusal, a wait or a run under way, never silence, and never ``InternalError`` (the operator
  failing on its own input);
- after delete, within :func:`gone_within_s`, the object is gone (no finalizer stuck) and so is
  every object the batch made in the namespace (Jobs, ConfigMaps, Secrets, ServiceAccounts,
  Roles, RoleBindings, Services, DaemonSets; the Jobs' pods are the garbage collector's);
- a canary credential, in a Secret that the specs name wherever the schema takes a Secret
  (``headers[].valueFrom.secretKeyRef``, ``configConsistency.secrets``), appears nowhere the
  operator writes: status, events, child objects, its log;
- the operator's log has no traceback for the namespace.

Every address a spec dials is one that keeps the run bounded: the reference server, a closed
port on the loopback, or a name that does not resolve; shard pods are held to a node label no
node has (no shard runs a benchmark process here) and are at most :data:`MAX_SHARDS`. The
defects the generated specs found have a test each below (a label value no label can hold, a
deleted watching gate's timer) or in the unit tests of the module fixed.
A small fixed draw runs by default; ``--long`` draws over 1,000 accepted specs.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from kubernetes import client

from mcp_devcluster import crdspecs, specgen, stack
from mcp_devcluster.crdspecs import GROUP, PLURALS, VERSION
from mcp_operator.api.common import LABEL_VALUE

BATCH = 24  # specs drawn per batch, applied together
DEFAULT_BATCHES, LONG_BATCHES = 2, 56
LONG_MIN_ACCEPTED = 1000
MIN_ACCEPTED_SHARE = 0.8  # of the drawn specs the API server stores: the generator keeps the rules
# create to conditions: 1,128 specs of the --long run took 0.1 s at P50 and 43.8 s at most on a
# busy 2-core machine (the default draw about 2 s), so a minute is a wait, not a silence
JUDGED_WITHIN_S = 60.0
GONE_BASE_S, GC_RATE = 30.0, 10.0  # delete to nothing left: see gone_within_s
POLL_S = 0.5
REASON = re.compile(r"^[A-Z][A-Za-z0-9]*$")
CANARY = "canary-8d1f0c9e27b4-credential"
CANARY_SECRET, CANARY_KEY = "generated-canary", "token"
# a Job of 256 shards brings 768 objects (pods, progress and result ConfigMaps) that the garbage
# collector takes 40 s and more to delete at the controller manager's rate: 1,000 specs would take
# hours; the schema's own bounds are test_hostile_input.py's
MAX_SHARDS = 8
SERVICE = "generated-svc"  # exists, with no endpoints: half the serviceRefs name it
PARKED = {"mcp2026.io/generated-spec": "parked"}  # no node has it: shard pods stay Pending
CLOSED, UNRESOLVED = "http://127.0.0.1:9", "http://generated-spec.invalid:8000"
LABEL_VALUES = st.from_regex(specgen.go_pattern(LABEL_VALUE), alphabet=specgen.ASCII).filter(
    lambda v: len(v) <= 63
)
SUFFIXES = ["", "/", "/v1", "/metrics", "/x?q=1", "/p;m=1"]  # a #fragment is refused at apply
CHILD_LISTS: dict[str, Callable[[client.ApiClient, str], Any]] = {
    "Job": lambda a, ns: client.BatchV1Api(a).list_namespaced_job(ns),
    "Pod": lambda a, ns: client.CoreV1Api(a).list_namespaced_pod(ns),
    "ConfigMap": lambda a, ns: client.CoreV1Api(a).list_namespaced_config_map(ns),
    "Secret": lambda a, ns: client.CoreV1Api(a).list_namespaced_secret(ns),
    "ServiceAccount": lambda a, ns: client.CoreV1Api(a).list_namespaced_service_account(ns),
    "Service": lambda a, ns: client.CoreV1Api(a).list_namespaced_service(ns),
    "Role": lambda a, ns: client.RbacAuthorizationV1Api(a).list_namespaced_role(ns),
    "RoleBinding": lambda a, ns: client.RbacAuthorizationV1Api(a).list_namespaced_role_binding(ns),
    "DaemonSet": lambda a, ns: client.AppsV1Api(a).list_namespaced_daemon_set(ns),
}


# -- what the specs dial and reference -------------------------------------------------------------


def _is_address(schema: dict[str, Any]) -> bool:
    """A field the credential rules guard as an address (userinfo refused): one the run dials."""
    return any("@')" in r["rule"] for r in schema.get("x-kubernetes-validations") or [])


def rewrite(refserver: str) -> specgen.Rewrite:
    """Addresses replaced by bounded ones (a ``name=`` prefix kept), Secret references pointed at
    the canary, shard pods parked, and a header from the canary on some benchmarks."""
    addresses = st.sampled_from([refserver.rstrip("/"), CLOSED, UNRESOLVED])

    def apply(draw: st.DrawFn, path: specgen.Path_, schema: dict[str, Any], value: Any) -> Any:
        if _is_address(schema) and isinstance(value, str) and "://" in value:
            prefix = value.split("=", 1)[0] + "=" if not value.startswith("http") else ""
            return prefix + draw(addresses) + draw(st.sampled_from(SUFFIXES))
        if path[-1:] == ("serviceRef",) and isinstance(value, dict) and draw(st.booleans()):
            return {**{k: v for k, v in value.items() if k != "namespace"}, "name": SERVICE}
        if path in (("shards",), ("drill", "shards", "count")) and isinstance(value, int):
            return min(value, MAX_SHARDS)
        if path[-1:] == ("secretKeyRef",):
            return {"name": CANARY_SECRET, "key": CANARY_KEY}
        if path[-2:] == ("configConsistency", "secrets"):
            return [CANARY_SECRET]
        if path[-1:] in (("matchLabels",), ("selector",)) and isinstance(value, dict):
            return {key: draw(LABEL_VALUES) for key in value}  # others are refused at apply
        if path == () and isinstance(value, dict):
            return _whole_spec(draw, value)
        return value

    return apply


def _whole_spec(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    runners: list[Any] = []
    if "load" in spec:  # an MCPBenchmark: a runner always exists, drawn or not
        runners.append(spec.setdefault("runner", {}))
        if draw(st.booleans()):
            ref = {"secretKeyRef": {"name": CANARY_SECRET, "key": CANARY_KEY}}
            headers = spec["target"].get("headers", [])[:15]
            spec["target"]["headers"] = [*headers, {"name": "Authorization", "valueFrom": ref}]
    elif isinstance(spec.get("drill"), dict) and isinstance(spec["drill"].get("shards"), dict):
        runners.append(spec["drill"]["shards"].setdefault("runner", {}))
    for runner in runners:
        runner["nodeSelector"] = {**runner.get("nodeSelector", {}), **PARKED}
    return spec


def drawn_spec(refserver: str) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    hook = rewrite(refserver)
    return st.one_of(
        *[
            st.tuples(st.just(kind), specgen.value(crdspecs.spec_schema(kind), hook))
            for kind in sorted(PLURALS)
        ]
    )


# -- judging one batch ---------------------------------------------------------------------------


@dataclass
class Tally:
    drawn: int = 0
    refused_by_server: Counter[str] = field(default_factory=Counter)
    applied: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    judged_s: list[float] = field(default_factory=list)
    gone_s: list[float] = field(default_factory=list)
    last_left: list[str] = field(default_factory=list)
    said: dict[str, str] = field(default_factory=dict)  # a message of each Ready reason


def _judged(obj: dict[str, Any]) -> tuple[str, str] | None:
    """(Accepted reason, Ready reason) once Ready, or else Accepted (a gate created suspended has
    no verdict yet), speaks for this generation; "-" for the one that is not there."""
    generation = obj["metadata"].get("generation")
    conditions = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
    accepted, ready = conditions.get("Accepted") or {}, conditions.get("Ready") or {}
    if generation not in (ready.get("observedGeneration"), accepted.get("observedGeneration")):
        return None
    return str(accepted.get("reason", "-")), str(ready.get("reason", "-"))


def _list(api: client.ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    custom = client.CustomObjectsApi(api)
    return {
        item["metadata"]["name"]: item
        for plural in PLURALS.values()
        for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]
    }


def _children(api: client.ApiClient, namespace: str) -> dict[str, dict[str, Any]]:
    """Every object of the kinds a run makes, as plain JSON, by ``Kind/name``."""
    out: dict[str, dict[str, Any]] = {}
    for kind, lister in CHILD_LISTS.items():
        for item in lister(api, namespace).items:
            out[f"{kind}/{item.metadata.name}"] = api.sanitize_for_serialization(item)
    return out


def _leaks(text: str) -> bool:
    encoded = base64.b64encode(CANARY.encode()).decode()
    return CANARY in text or encoded in text


def gone_within_s(made: int) -> float:
    """How long a batch's objects may take to go after its delete: the garbage collector deletes
    children at the controller manager's client rate (20 requests a second by default, shared with
    the Job controller deleting the pods), and a Job of 200 shards brings 200 pods and 200 progress
    ConfigMaps; so half that rate for what the batch made, plus 30 s for the operator's own
    finalizers and a busy machine."""
    return GONE_BASE_S + made / GC_RATE


def _canary_hits(
    api: client.ApiClient,
    namespace: str,
    objs: dict[str, dict[str, Any]],
    children: dict[str, dict[str, Any]],
) -> list[str]:
    hits = [f"{name}.status" for name, obj in objs.items() if _leaks(json.dumps(obj.get("status") or {}))]
    events = client.CoreV1Api(api).list_namespaced_event(namespace).items
    hits += [f"Event/{e.metadata.name}" for e in events if _leaks(f"{e.reason} {e.message}")]
    for name, child in children.items():
        if name != f"Secret/{CANARY_SECRET}" and _leaks(json.dumps(child)):
            hits.append(name)
    return hits


def run_batch(
    api: client.ApiClient,
    namespace: str,
    batch_no: int,
    specs: list[tuple[str, dict[str, Any]]],
    tally: Tally,
) -> None:
    custom = client.CustomObjectsApi(api)
    before = set(_children(api, namespace))
    names: dict[str, str] = {}
    shown: dict[str, str] = {}
    for i, (kind, spec) in enumerate(specs):
        name = f"gen-{batch_no}-{i}"
        shown[name] = json.dumps(spec)[:700]
        tally.drawn += 1
        status, message = crdspecs.dry_run(api, namespace, kind, name, spec)
        if status != 201:
            tally.refused_by_server[_refusal(message)] += 1
            continue
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURALS[kind], crdspecs.body(kind, name, spec)
        )
        names[name] = kind
        tally.applied[kind] += 1
    started, judged = time.monotonic(), dict[str, tuple[str, str]]()
    while len(judged) < len(names):
        objs = _list(api, namespace)
        for name in names:
            if name not in judged and name in objs and (reasons := _judged(objs[name])) is not None:
                judged[name] = reasons
                tally.judged_s.append(time.monotonic() - started)
        silent = sorted(set(names) - set(judged))
        assert time.monotonic() - started < JUDGED_WITHIN_S or not silent, [
            (n, shown[n], (objs.get(n) or {}).get("status")) for n in silent[:3]
        ]
        time.sleep(POLL_S)
    objs = _list(api, namespace)
    for name, (accepted, ready) in judged.items():
        condition = {c["type"]: c for c in objs[name]["status"]["conditions"]}
        assert "InternalError" not in (accepted, ready), (name, condition, shown[name])
        spoken = [c for c in (condition.get("Accepted"), condition.get("Ready")) if c is not None]
        for said in spoken:
            assert REASON.match(said["reason"]) and said.get("message"), (name, said, shown[name])
        tally.reasons[f"{names[name]} {accepted}/{ready}"] += 1
        tally.said.setdefault(
            ready, str((condition.get("Ready") or condition["Accepted"]).get("message"))[:160]
        )
    children = _children(api, namespace)
    assert _canary_hits(api, namespace, objs, children) == []
    bound = gone_within_s(len(set(children) - before))
    for name, kind in names.items():
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURALS[kind], name)
    deleted = time.monotonic()
    while left := _left(_children(api, namespace), before) + crdspecs.stored(api, namespace):
        assert time.monotonic() - deleted < bound, f"left after delete: {sorted(left)[:10]}"
        tally.last_left = sorted(left)
        time.sleep(POLL_S)
    tally.gone_s.append(time.monotonic() - deleted)


def _left(children: dict[str, dict[str, Any]], before: set[str]) -> list[str]:
    """What the batch made that is still there, but the Pods of its Jobs: those are the Jobs'
    children, which the garbage collector takes once the Job is gone (a Job of 200 shards takes
    tens of seconds), not the operator's."""
    return [name for name in set(children) - before if not name.startswith("Pod/")]


def _refusal(message: str) -> str:
    """What the API server refused, without the values: the field paths it names."""
    paths = sorted(set(re.findall(r"(?<![\w.-])spec(?:\.[A-Za-z]+|\[\d+\])+", message)))
    return ", ".join(re.sub(r"\[\d+\]", "[]", p) for p in paths)[:160] or message[:160]


# -- the operator's log ----------------------------------------------------------------------------


def _lines_since(log: Path, offset: int) -> list[str]:
    """The operator's log lines written since ``offset``."""
    with log.open("rb") as stream:
        stream.seek(offset)
        return stream.read().decode(errors="replace").splitlines()


def _tracebacks(log: Path, offset: int, namespace: str) -> list[str]:
    """Log lines since ``offset`` with a traceback about ``namespace`` or about no object."""
    found = []
    for line in _lines_since(log, offset):
        try:
            record = json.loads(line)
        except ValueError:
            record = {"message": line}
        about = record.get("namespace") if isinstance(record, dict) else None
        if about not in (None, namespace):
            continue
        if "exception" in record or "Traceback" in line:
            found.append(line[:2000])
    return found


def _canary_in_log(log: Path, offset: int) -> list[str]:
    return [line[:300] for line in _lines_since(log, offset) if _leaks(line)]


# -- the test --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "batches",
    [DEFAULT_BATCHES, pytest.param(LONG_BATCHES, marks=(pytest.mark.long, pytest.mark.timeout(2400)))],
)
def test_generated_accepted_specs_get_a_condition_leave_nothing_and_copy_no_credential(
    kube: Any, api: client.ApiClient, operator: Any, refserver: str, batches: int
) -> None:
    is_long = batches == LONG_BATCHES
    core = client.CoreV1Api(api)
    core.create_namespaced_secret(
        kube.namespace,
        client.V1Secret(metadata=client.V1ObjectMeta(name=CANARY_SECRET), string_data={CANARY_KEY: CANARY}),
    )
    core.create_namespaced_service(kube.namespace, stack.service_body(SERVICE, 8000))
    log = Path(operator.process.log_path)
    offset = log.stat().st_size
    tally, counter, started = Tally(), iter(range(10**6)), time.monotonic()

    @settings(crdspecs.examples(is_long, batches, batches), phases=(Phase.generate,))
    @given(batch=st.lists(drawn_spec(refserver), min_size=BATCH, max_size=BATCH))
    def judged(batch: list[tuple[str, dict[str, Any]]]) -> None:
        run_batch(api, kube.namespace, next(counter), batch, tally)

    judged()
    took = time.monotonic() - started
    applied = sum(tally.applied.values())
    refused = sum(tally.refused_by_server.values())
    judged_s, gone_s = sorted(tally.judged_s), sorted(tally.gone_s)
    print(
        f"\n{tally.drawn} specs drawn, {applied} accepted by the API server and applied "
        f"({dict(tally.applied)}), {refused} refused by it ({dict(tally.refused_by_server.most_common(8))}); "
        f"create to conditions P50 {judged_s[len(judged_s) // 2]:.1f}s max {judged_s[-1]:.1f}s; "
        f"delete to nothing left P50 {gone_s[len(gone_s) // 2]:.1f}s max {gone_s[-1]:.1f}s; "
        f"{took:.0f}s in all\n"
        f"reasons (Accepted/Ready): {dict(tally.reasons.most_common())}\n"
        f"what each reason said first: {tally.said}\n"
        f"the last to go after a delete: {tally.last_left[:8]}\n"
        f"rules left to the API server: {sorted(specgen.UNHANDLED_RULES)}"
    )
    assert applied >= MIN_ACCEPTED_SHARE * tally.drawn, (
        "the generator breaks the CRDs' rules: the run proves little"
    )
    if is_long:
        assert applied >= LONG_MIN_ACCEPTED
    assert _tracebacks(log, offset, kube.namespace) == []
    assert _canary_in_log(log, offset) == []


def test_a_label_value_no_selector_can_hold_is_refused_with_its_path(
    api: client.ApiClient, kube: Any
) -> None:
    """The generated specs found it: a matchLabels value no label can hold was admitted, and every
    pod list with it answered 400 (sync_pod_gate logged a traceback every 60 s). The API server
    now refuses it, naming the field (``mcp_common.labels.LabelValue`` on every selector map)."""
    spec = {
        "target": {"url": CLOSED},
        "checks": {"healthProbe": {"enabled": False}},
        "podReadinessGate": {"matchLabels": {"app": "ÁÄ"}},
    }
    status, message = crdspecs.dry_run(api, kube.namespace, "MCPReadiness", "bad-label", spec)
    assert status == 422 and "spec.podReadinessGate.matchLabels" in message, (status, message)


def test_a_watching_gate_deleted_mid_round_leaves_no_timer_behind(
    kube: Any, api: client.ApiClient, operator: Any
) -> None:
    """The generated specs found it: a watching gate deleted while its round ran kept its
    watch_release timer, a GET answered 404 every 2 s for as long as the operator ran (42 of 44
    such gates in the 1,344-spec run). The watch is a tick now (``handlers.periodic``), which the
    gate's DELETED event ends: once its round is over, no request for it reaches the API server."""
    custom = client.CustomObjectsApi(api)
    spec = {"target": {"url": CLOSED}, "watch": {"workload": {"name": "web"}}}
    custom.create_namespaced_custom_object(
        GROUP, VERSION, kube.namespace, "mcpreadinesses", crdspecs.body("MCPReadiness", "watching", spec)
    )
    deadline = time.monotonic() + 60
    while (kube.get("mcpreadiness", "watching").get("status") or {}).get("phase") != "Running":
        assert time.monotonic() < deadline, kube.get("mcpreadiness", "watching").get("status")
        time.sleep(0.2)
    log = Path(operator.process.log_path)
    offset = log.stat().st_size
    custom.delete_namespaced_custom_object(GROUP, VERSION, kube.namespace, "mcpreadinesses", "watching")
    while crdspecs.stored(api, kube.namespace):
        assert time.monotonic() < deadline + 30, "not deleted"
        time.sleep(0.2)
    # the round in flight may still look for its gate (waiting for the release to settle); once
    # it ends, no GET of a gate is answered 404 for four intervals of the watch. The defect's
    # GET every 2 s would never stop.
    windows: list[int] = []

    def quiet_window() -> bool:
        before = stack.api_requests(kube.kubeconfig, "mcpreadinesses")
        time.sleep(8)
        after = stack.api_requests(kube.kubeconfig, "mcpreadinesses")
        windows.append(after["GET", "404"] - before["GET", "404"])
        return windows[-1] == 0

    stack.until(quiet_window, "no GET of a gate answered 404 for 8 s", 120, lambda: windows, interval_s=0)
    assert [line for line in _watch_lines(log, offset, kube.namespace) if "failed" in line] == []


def _watch_lines(log: Path, offset: int, namespace: str) -> list[str]:
    """The operator's log lines about the watch of gate ``watching``, from ``offset`` on."""
    records = [json.loads(line) for line in _lines_since(log, offset) if line.startswith("{")]
    return [
        r["message"]
        for r in records
        if (r.get("namespace"), r.get("name")) == (namespace, "watching") and "watch_release" in r["message"]
    ]
