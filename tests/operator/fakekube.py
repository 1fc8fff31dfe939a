"""An in-memory stand-in for the parts of the Kubernetes API the operator calls.

Why a fake here: the handler and shard tests check the handlers' own logic in isolation (which
objects get created, what status and events come out, what a 404, 409 or 403 leads to) in
milliseconds and without a control plane. The same paths run against a real API server in
``e2e/``, which is also where the server's own behaviour (defaulting, admission, garbage
collection, the Job controller) is covered. This fake implements only what the operator relies
on, and is strict where it does:

* Objects are JSON dicts per (kind, namespace, name). ``create`` answers 409 when the name is
  taken; ``read``, ``replace``, ``patch`` and ``delete`` answer 404 when it is not; a create
  stamps ``uid``, ``resourceVersion`` and ``creationTimestamp``.
* ``list`` honours ``label_selector`` with equality terms (``k=v``, ``k==v``, ``k!=v``, ``k``,
  ``!k``, comma-joined meaning AND); set-based selectors raise, so no test passes on a selector
  the fake ignored. ``field_selector`` takes equality terms on dotted paths
  (``involvedObject.kind=X``), ``limit`` and ``_continue`` page, ``list_*_for_all_namespaces``
  lists every namespace, and ``_preload_content=False`` answers the raw JSON (``.data``).
* ``patch`` is a strategic merge for built-in kinds (``conditions`` merged by ``type``: the
  Python client sends a dict body as strategic-merge-patch) and a JSON merge patch for custom
  objects; a ``*_status`` patch changes only ``status``. A ``metadata.resourceVersion`` in a
  patch or replace body is a precondition: 409 when the object has moved on since.
* Every call first goes through the real client method, on an API object whose ApiClient stops
  it before any I/O: argument positions, keyword names and body shapes are validated by the
  client itself (a manifest with an unknown field fails here as it would in the pod). Answers
  come back as the client's own models (``V1Job``, ``V1PodList``, ...), so attribute access
  (``job.status.conditions``, ``m.metadata.name``) is exactly what the code sees in a cluster.
* Nodes and Namespaces are cluster-scoped (stored under namespace ""). A pod's eviction deletes
  the pod (a PodDisruptionBudget's 429 is ``refuse("create", "Eviction", 429)``); a Deployment's
  scale reads and patches its ``spec.replicas``; ``preconditions.uid`` on a delete or eviction
  answers 409 when the object is another one by now.
* A Secret's ``stringData`` is folded into ``data`` (base64) on write, and an ``immutable``
  Secret's data cannot change (422), as the API server does.
* ``start_indexed_job`` creates an Indexed Job's pods as the Job controller does (owner
  reference, completion-index annotation and labels), and ``container_env`` resolves a pod's
  environment as the kubelet does (values, ``fieldRef``, ``secretKeyRef`` and
  ``JOB_COMPLETION_INDEX``), so a shard runs with exactly what its Job gives it.
* A pod's log (``read_namespaced_pod_log``: its container checked, ``tail_lines`` honoured) is
  what ``run_in_pod`` captured of an entrypoint's stdout, or what ``write_log`` put there.
* ``refuse`` makes matching calls fail with a given status (e.g. 403 Forbidden); a log read is
  ``refuse("read", "PodLog", 403)``.
* Every call is recorded in ``calls``, with the status it was answered with.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime as dt
import hashlib
import inspect
import io
import itertools
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel

Obj = dict[str, Any]

# resource part of a client method name -> kind; "custom_object" is addressed by group/plural
KINDS = {
    "config_map": "ConfigMap",
    "job": "Job",
    "pod": "Pod",
    "service": "Service",
    "service_account": "ServiceAccount",
    "role": "Role",
    "role_binding": "RoleBinding",
    "secret": "Secret",
    "deployment": "Deployment",
    "pod_disruption_budget": "PodDisruptionBudget",
    "resource_quota": "ResourceQuota",
    "event": "Event",
}
ALL_NAMESPACES = "_for_all_namespaces"  # list_<resource>_for_all_namespaces
JOB_INDEX = "batch.kubernetes.io/job-completion-index"  # on an Indexed Job's pods
# cluster-scoped kinds (stored under namespace ""), addressed as e.g. read_node, patch_node
CLUSTER_KINDS = {
    "namespace": "Namespace",
    "node": "Node",
    "self_subject_access_review": "SelfSubjectAccessReview",
}
# subresources: the kind of their body, and the stored kind they act on
SUBRESOURCES = {
    "pod_eviction": ("Eviction", "Pod"),
    "deployment_scale": ("Scale", "Deployment"),
    "pod_log": ("PodLog", "Pod"),
}
_METHOD = re.compile(
    r"^(?P<verb>create|read|get|replace|patch|list|delete)_namespaced_(?P<resource>\w+?)(?P<status>_status)?$"
)
_CLUSTER_METHOD = re.compile(
    r"^(?P<verb>create|read|get|replace|patch|list|delete)_(?P<resource>\w+?)(?P<status>_status)?$"
)
_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
}
_STATUS_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    409: "AlreadyExists",
    422: "Invalid",
    429: "TooManyRequests",
}


def custom_kind(group: str, plural: str) -> str:
    """The store's kind for a custom resource (the client addresses those by group and plural)."""
    return f"{plural}.{group}"


def api_error(status: int, message: str, reason: str | None = None) -> ApiException:
    """An ApiException as the client raises it: HTTP reason phrase, a Status object as body."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": _STATUS_REASONS.get(status, ""),
        "code": status,
    }
    return ApiException(status=status, reason=reason or _REASONS.get(status, ""), body=json.dumps(body))


@dataclass(frozen=True)
class Call:
    """One API call as the fake saw it."""

    api: str  # CoreV1Api, BatchV1Api, ...
    method: str  # the client method, e.g. create_namespaced_job
    verb: str  # create, read, replace, patch, list, delete
    kind: str
    namespace: str
    name: str | None
    body: Any
    options: dict[str, Any]  # keyword options such as label_selector or propagation_policy
    answered: int  # HTTP status the fake answered with


@dataclass(frozen=True)
class Refusal:
    verb: str
    kind: str
    status: int
    reason: str
    name: str | None


class _Stopped(Exception):
    pass


class _StopBeforeIO:
    """The ApiClient of a real API object: its first use ends the call, after the client has
    validated the arguments."""

    def __getattr__(self, name: str) -> Any:
        raise _Stopped(name)


class _NoRawApiClient:
    """What ``kube.api_client()`` returns under the fake: code that builds its own API objects on
    it (rather than asking ``kube.core()`` and the like) fails loudly instead of reaching out."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the fake serves kube.core()/batch()/...; a raw ApiClient was used ({name})")


def _validate_with_client(real: type, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        getattr(real(api_client=_StopBeforeIO()), method)(*args, **kwargs)
    except _Stopped:
        return
    raise AssertionError(f"{real.__name__}.{method} did not reach its ApiClient")  # pragma: no cover


def _labels_match(selector: str | None, labels: Mapping[str, str]) -> bool:
    """Equality-based label selector semantics; set-based terms are refused, not ignored."""
    if not selector:
        return True
    for raw in selector.split(","):
        term = raw.strip()
        if not term or "(" in term or re.search(r"\s(in|notin)\s", term):
            raise ValueError(f"the fake supports equality label selectors only, not {selector!r}")
        if "!=" in term:
            key, value = (part.strip() for part in term.split("!=", 1))
            ok = labels.get(key) != value
        elif "=" in term:
            key, value = (part.strip() for part in term.replace("==", "=").split("=", 1))
            ok = labels.get(key) == value
        elif term.startswith("!"):
            ok = term[1:].strip() not in labels
        else:
            ok = term in labels
        if not ok:
            return False
    return True


def _fields_match(selector: str | None, obj: Obj) -> bool:
    """Equality field selector terms (``a.b=c``, ``a.b!=c``, comma-joined meaning AND)."""
    for raw in (selector or "").split(","):
        term = raw.strip()
        if not term:
            continue
        negated = "!=" in term
        path, value = (part.strip() for part in term.replace("!=", "=").replace("==", "=").split("=", 1))
        found: Any = obj
        for key in path.split("."):
            found = found.get(key) if isinstance(found, dict) else None
        if (str(found if found is not None else "") == value) == negated:
            return False
    return True


@dataclass(frozen=True)
class RawResponse:
    """What the client returns with ``_preload_content=False``: the body, unparsed."""

    data: bytes
    status: int = 200


def _merge(base: Any, patch: Any, *, strategic: bool) -> Any:
    """JSON merge patch (RFC 7386); with ``strategic``, ``conditions`` lists merge by type."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(base) if isinstance(base, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif strategic and key == "conditions" and isinstance(value, list):
            out[key] = _merge_by_type(out.get(key) or [], value)
        else:
            out[key] = _merge(out.get(key), value, strategic=strategic)
    return out


def _merge_by_type(current: list[Obj], patch: list[Obj]) -> list[Obj]:
    merged = [copy.deepcopy(c) for c in current]
    for item in patch:
        at = next((i for i, c in enumerate(merged) if c.get("type") == item.get("type")), None)
        if at is None:
            merged.append(copy.deepcopy(item))
        else:
            merged[at] = _merge(merged[at], item, strategic=True)
    return merged


def merge_patch(base: Obj, patch: Mapping[str, Any]) -> Obj:
    """``patch`` applied to ``base`` as the API server applies a JSON merge patch (kopf writes a
    handler's ``patch`` to a custom object this way): the status a handler's next call sees."""
    merged = _merge(base, json.loads(json.dumps(dict(patch))), strategic=False)
    assert isinstance(merged, dict)
    return merged


def pod_object(
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    *,
    phase: str = "Running",
    exit_code: int | None = None,
    message: str | None = None,
    conditions: list[Obj] | None = None,
    deleting: bool = False,
) -> Obj:
    """A pod as the API server holds it once the kubelet reported on it (every required field set),
    with one container ``main`` that terminated with ``exit_code`` when that is given."""
    metadata: Obj = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if deleting:
        metadata["deletionTimestamp"] = _now()
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"containers": [{"name": "main", "image": "registry.example/main:1"}]},
        "status": {
            "phase": phase,
            "conditions": list(conditions or []),
            "containerStatuses": [container_status("main", exit_code=exit_code, message=message)],
        },
    }


def container_status(name: str, *, exit_code: int | None = None, message: str | None = None) -> Obj:
    """A container's status as the kubelet reports it: running, or terminated with ``exit_code``
    and the termination ``message`` the container wrote."""
    state: Obj = {"running": {}}
    if exit_code is not None:
        state = {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}}
        if message is not None:
            state["terminated"]["message"] = message
    return {
        "name": name,
        "image": "registry.example/main:1",
        "imageID": "registry.example/main@sha256:" + "0" * 64,
        "ready": exit_code is None,
        "restartCount": 0,
        "state": state,
    }


def _admit(kind: str, obj: Obj, current: Obj | None = None) -> Obj:
    """What the API server does to a write before storing it: a Secret's ``stringData`` goes
    into ``data``, base64-encoded, and an immutable Secret's data stays as it is."""
    if kind != "Secret":
        return obj
    strings = obj.pop("stringData", None) or {}
    data = dict(obj.get("data") or {})
    data.update({k: base64.b64encode(str(v).encode()).decode() for k, v in strings.items()})
    if data:
        obj["data"] = data
    if current is not None and current.get("immutable") and obj.get("data") != current.get("data"):
        raise api_error(422, f'Secret "{current["metadata"]["name"]}" is invalid: data: field is immutable')
    return obj


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeApi:
    """One of the client's API classes (``CoreV1Api``, ...) over the fake's store: a method the
    real class does not have is an AttributeError here too."""

    def __init__(self, kube: FakeKube, real: type) -> None:
        self._kube = kube
        self._real = real

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_") or not callable(getattr(self._real, method, None)):
            raise AttributeError(f"{self._real.__name__} has no method {method}")

        def invoke(*args: Any, **kwargs: Any) -> Any:
            return self._kube.invoke(self._real, method, args, kwargs)

        invoke.__name__ = method
        return invoke


class FakeKube:
    """The store and the four API objects the operator asks ``mcp_operator.kube`` for."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.calls: list[Call] = []
        self.refusals: list[Refusal] = []
        self._lock = threading.Lock()
        self._versions = itertools.count(1)
        self.core = FakeApi(self, client.CoreV1Api)
        self.batch = FakeApi(self, client.BatchV1Api)
        self.rbac = FakeApi(self, client.RbacAuthorizationV1Api)
        self.custom = FakeApi(self, client.CustomObjectsApi)
        self.api_client = _NoRawApiClient()
        self.apps = FakeApi(self, client.AppsV1Api)
        self.policy = FakeApi(self, client.PolicyV1Api)
        self.authz = FakeApi(self, client.AuthorizationV1Api)
        # rights the fake's account lacks, as (verb, group, resource[/subresource], namespace);
        # namespace "" is cluster-wide. Everything else is allowed.
        self.denied: set[tuple[str, str, str, str]] = set()
        self.logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> its container's log

    # --- for tests: arrange and inspect (not API calls, so not recorded) ---

    def put(self, kind: str, obj: Obj) -> Obj:
        """Store an object as if it already existed (metadata.namespace required, except for
        cluster-scoped kinds such as Node, which live under namespace "")."""
        stored = self._stamp(_admit(kind, json.loads(json.dumps(obj))))
        meta = stored["metadata"]
        namespace = "" if kind in CLUSTER_KINDS.values() else meta["namespace"]
        with self._lock:
            self.objects[(kind, namespace, meta["name"])] = stored
        return copy.deepcopy(stored)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        with self._lock:
            obj = self.objects.get((kind, namespace, name))
            return None if obj is None else copy.deepcopy(obj)

    def names(self, kind: str, namespace: str) -> list[str]:
        with self._lock:
            return sorted(n for (k, ns, n) in self.objects if k == kind and ns == namespace)

    def set_status(self, kind: str, namespace: str, name: str, status: Obj) -> None:
        """Replace an object's status, as its controller (the Job controller, the kubelet) would."""
        with self._lock:
            self.objects[(kind, namespace, name)]["status"] = json.loads(json.dumps(status))

    def refuse(self, verb: str, kind: str, status: int, reason: str = "", name: str | None = None) -> None:
        """Answer every matching call with ``status`` from now on."""
        self.refusals.append(Refusal(verb, kind, status, reason or _REASONS.get(status, ""), name))

    def write_log(self, namespace: str, pod: str, text: str) -> None:
        """Append to a pod's log, as its container's stdout would."""
        with self._lock:
            self.logs[(namespace, pod)] = self.logs.get((namespace, pod), "") + text

    def run_in_pod(self, namespace: str, pod: str, entrypoint: Callable[[], int]) -> int:
        """Run ``entrypoint`` (blocking, in this thread) with its stdout going to the pod's log,
        as the kubelet keeps a container's output; returns its exit code."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = entrypoint()
        self.write_log(namespace, pod, out.getvalue())
        return code

    def calls_to(self, verb: str | None = None, kind: str | None = None) -> list[Call]:
        return [c for c in self.calls if verb in (None, c.verb) and kind in (None, c.kind)]

    def start_indexed_job(self, namespace: str, job: str) -> list[Obj]:
        """The pods the Job controller starts for an Indexed Job: one per completion index, named
        ``<job>-<index>-<suffix>``, labelled from the template plus the controller's own labels,
        annotated with the index, and controlled by the Job."""
        manifest = self.get("Job", namespace, job)
        assert manifest is not None, f"no Job {namespace}/{job}"
        template, job_uid = manifest["spec"]["template"], manifest["metadata"]["uid"]
        pods = []
        for index in range(int(manifest["spec"].get("completions") or 1)):
            suffix = hashlib.sha256(f"{job_uid}/{index}".encode()).hexdigest()[:5]
            labels = {
                **(template.get("metadata") or {}).get("labels", {}),
                "job-name": job,
                "batch.kubernetes.io/job-name": job,
                "controller-uid": job_uid,
                "batch.kubernetes.io/controller-uid": job_uid,
                JOB_INDEX: str(index),
            }
            owner = {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": job_uid}
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{job}-{index}-{suffix}",
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": {JOB_INDEX: str(index)},
                    "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
                },
                "spec": copy.deepcopy(template["spec"]),
                "status": {"phase": "Pending"},
            }
            pods.append(self.put("Pod", pod))
        return pods

    def container_env(self, pod: Obj) -> dict[str, str]:
        """The first container's environment as the kubelet resolves it; a reference it could
        not resolve (a missing Secret or key) fails here as the container would not start."""
        meta = pod["metadata"]
        fields = {"metadata.name": meta["name"], "metadata.namespace": meta["namespace"]}
        fields["metadata.uid"] = meta["uid"]
        env: dict[str, str] = {}
        index = (meta.get("annotations") or {}).get(JOB_INDEX)
        if index is not None:  # Kubernetes sets it in every container of an Indexed Job's pod
            env["JOB_COMPLETION_INDEX"] = index
        for var in pod["spec"]["containers"][0].get("env") or []:
            source = var.get("valueFrom")
            if source is None:
                env[var["name"]] = var.get("value", "")
            elif "fieldRef" in source:
                env[var["name"]] = fields[source["fieldRef"]["fieldPath"]]
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                secret = self.get("Secret", meta["namespace"], ref["name"]) or {}
                encoded = (secret.get("data") or {}).get(ref["key"])
                if encoded is None:
                    raise LookupError(f"CreateContainerConfigError: secret {ref['name']} key {ref['key']}")
                env[var["name"]] = base64.b64decode(encoded).decode()
            else:
                raise NotImplementedError(f"the fake kubelet does not resolve {source}")
        return env

    # --- the API ---

    def invoke(self, real: type, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        _validate_with_client(real, method, args, kwargs)
        signature = inspect.signature(getattr(real, method))
        params = dict(signature.bind(None, *args, **kwargs).arguments)
        params.update(params.pop("kwargs", None) or {})  # clients whose methods take **kwargs
        every = method.startswith("list_") and method.endswith(ALL_NAMESPACES)
        served = f"list_namespaced_{method[5 : -len(ALL_NAMESPACES)]}" if every else method
        match = _METHOD.match(served) or _CLUSTER_METHOD.match(served)
        namespaced = "namespace" in params or every
        known = (*KINDS, *SUBRESOURCES, "custom_object") if namespaced else tuple(CLUSTER_KINDS)
        if match is None or match["resource"] not in known:
            raise NotImplementedError(f"the fake does not implement {real.__name__}.{method}")
        verb, custom = match["verb"].replace("get", "read"), match["resource"] == "custom_object"
        resource = match["resource"]
        if custom:
            kind = custom_kind(params["group"], params["plural"])
        elif resource in SUBRESOURCES:
            kind = SUBRESOURCES[resource][0]
        else:
            kind = {**KINDS, **CLUSTER_KINDS}[resource]
        namespace, name = str(params.get("namespace", "")), params.get("name")
        body = json.loads(json.dumps(params["body"])) if "body" in params else None
        if name is None and verb == "create" and isinstance(body, dict):
            name = (body.get("metadata") or {}).get("name")  # recorded, and refusable, by name
        addressing = {"self", "namespace", "name", "body", "group", "version", "plural"}
        options = {k: v for k, v in params.items() if k not in addressing and not k.startswith("_")}
        if params.get("_continue"):
            options["continue"] = params["_continue"]
        with self._lock:
            try:
                self._refused(verb, kind, name)
                result, answered = self._serve(
                    verb,
                    kind,
                    None if every else namespace,
                    name,
                    body,
                    options,
                    status=bool(match["status"]),
                    custom=custom,
                )
            except ApiException as exc:
                self.calls.append(
                    Call(real.__name__, method, verb, kind, namespace, name, body, options, exc.status)
                )
                raise
            self.calls.append(
                Call(real.__name__, method, verb, kind, namespace, name, body, options, answered)
            )
        if params.get("_preload_content") is False:
            return RawResponse(json.dumps(result).encode(), answered)
        return _as_client_type(signature.return_annotation, result)

    def _refused(self, verb: str, kind: str, name: str | None) -> None:
        for rule in self.refusals:
            if (rule.verb, rule.kind) == (verb, kind) and rule.name in (None, name):
                raise api_error(rule.status, f"{verb} {kind} refused by the test", rule.reason)

    def _serve(
        self,
        verb: str,
        kind: str,
        namespace: str | None,  # None: every namespace (a list only)
        name: str | None,
        body: Any,
        options: Mapping[str, Any],
        *,
        status: bool,
        custom: bool,
    ) -> tuple[Any, int]:
        if kind == "PodLog":
            return self._pod_log(namespace, name, options), 200
        if kind in ("Eviction", "Scale"):
            return self._subresource(verb, kind, namespace, name, body)
        if kind == "SelfSubjectAccessReview":
            return self._review(body), 201
        if verb == "list":
            return self._list(kind, namespace, options), 200
        assert namespace is not None
        if verb == "create":
            return self._create(kind, namespace, body), 201
        assert name is not None
        key = (kind, namespace, name)
        current = self.objects.get(key)
        if current is None:
            raise api_error(404, f'{kind} "{name}" not found')
        if verb == "read":
            return copy.deepcopy(current), 200
        if verb == "delete":
            _check_uid(current, body)
            del self.objects[key]
            if kind == "Pod":  # the API server answers a pod's delete with the pod (a V1Pod)
                return {
                    **copy.deepcopy(current),
                    "metadata": {**current["metadata"], "deletionTimestamp": _now()},
                }, 200
            return {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name}}, 200
        if verb == "replace":
            return self._replace(key, current, body), 200
        return self._patch(key, current, body, status=status, strategic=not custom), 200

    def _list(self, kind: str, namespace: str | None, options: Mapping[str, Any]) -> Obj:
        """The objects of ``kind`` (in ``namespace``, or every one) the selectors match, a page of
        ``limit`` from ``continue`` on (the token: the offset)."""
        selector = options.get("label_selector")
        items = [
            copy.deepcopy(obj)
            for (k, ns, _), obj in sorted(self.objects.items())
            if k == kind
            and namespace in (None, ns)
            and _labels_match(selector, obj["metadata"].get("labels") or {})
            and _fields_match(options.get("field_selector"), obj)
        ]
        start = int(options.get("continue") or 0)
        limit = options.get("limit") or len(items) or 1
        meta: Obj = {"resourceVersion": str(next(self._versions))}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return {"kind": f"{kind}List", "metadata": meta, "items": items[start : start + limit]}

    def deny(self, verb: str, resource: str, namespace: str = "", group: str = "") -> None:
        """The account lacks this right (seen by SelfSubjectAccessReviews, not enforced)."""
        self.denied.add((verb, group, resource, namespace))

    def _review(self, body: Obj) -> Obj:
        attrs = body["spec"]["resourceAttributes"]
        resource = attrs["resource"] + (f"/{attrs['subresource']}" if attrs.get("subresource") else "")
        key = (attrs["verb"], attrs.get("group", ""), resource, attrs.get("namespace", ""))
        return {**body, "status": {"allowed": key not in self.denied}}

    def _subresource(
        self, verb: str, kind: str, namespace: str, name: str | None, body: Any
    ) -> tuple[Any, int]:
        """A pod's eviction (the pod is deleted; a PodDisruptionBudget's 429 is up to ``refuse``)
        and a Deployment's scale (read, or patch ``spec.replicas``)."""
        stored = "Pod" if kind == "Eviction" else "Deployment"
        assert name is not None
        key = (stored, namespace, name)
        current = self.objects.get(key)
        if current is None:
            raise api_error(404, f'{stored.lower()}s "{name}" not found')
        if kind == "Eviction" and verb == "create":
            _check_uid(current, (body or {}).get("deleteOptions"))
            del self.objects[key]
            return body, 201
        if kind == "Scale" and verb == "patch":
            replicas = ((body or {}).get("spec") or {}).get("replicas")
            if replicas is not None:
                current["spec"]["replicas"] = replicas
                current["metadata"]["resourceVersion"] = str(next(self._versions))
        elif kind != "Scale" or verb != "read":
            raise NotImplementedError(f"the fake does not implement {verb} of {kind}")
        scale = {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {k: current["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion")},
            "spec": {"replicas": current["spec"].get("replicas", 1)},
            "status": {"replicas": (current.get("status") or {}).get("replicas", 0)},
        }
        return scale, 200

    def _pod_log(self, namespace: str, name: str | None, options: Mapping[str, Any]) -> str:
        """A pod's log as the API server answers it: 404 for no pod, 400 for a container it does
        not have, the last ``tail_lines`` lines when asked."""
        pod = self.objects.get(("Pod", namespace, name or ""))
        if pod is None:
            raise api_error(404, f'pods "{name}" not found')
        container = options.get("container")
        names = [c["name"] for c in pod["spec"].get("containers") or []]
        if container is not None and container not in names:
            raise api_error(400, f"container {container} is not valid for pod {name}")
        text = self.logs.get((namespace, name or ""), "")
        tail = options.get("tail_lines")
        if tail is not None:
            text = "".join(text.splitlines(keepends=True)[-tail:]) if tail > 0 else ""
        return text

    def _create(self, kind: str, namespace: str, body: Obj) -> Obj:
        meta = body.setdefault("metadata", {})
        name = meta.get("name")
        if not name:
            raise api_error(422, f"{kind}: metadata.name: Required value")
        if meta.get("namespace") not in (None, namespace):
            raise api_error(400, "the namespace of the provided object does not match the namespace sent")
        if (kind, namespace, name) in self.objects:
            raise api_error(409, f'{kind} "{name}" already exists')
        meta["namespace"] = namespace
        stored = self._stamp(_admit(kind, body))
        self.objects[(kind, namespace, name)] = stored
        return copy.deepcopy(stored)

    def _replace(self, key: tuple[str, str, str], current: Obj, body: Obj) -> Obj:
        meta = body.setdefault("metadata", {})
        if meta.get("name") not in (None, key[2]):
            raise api_error(400, "the name of the object does not match the name in the URL")
        version = meta.get("resourceVersion")
        if version is not None and version != current["metadata"]["resourceVersion"]:
            raise api_error(
                409, "the object has been modified; please apply your changes to the latest version"
            )
        for kept in ("name", "namespace", "uid", "creationTimestamp"):
            meta[kept] = current["metadata"][kept]
        meta["resourceVersion"] = str(next(self._versions))
        if "status" in current:  # the status subresource is not written through the main resource
            body["status"] = current["status"]
        body = _admit(key[0], body, current)
        self.objects[key] = body
        return copy.deepcopy(body)

    def _patch(
        self, key: tuple[str, str, str], current: Obj, body: Obj, *, status: bool, strategic: bool
    ) -> Obj:
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version is not None and version != current["metadata"]["resourceVersion"]:
            raise api_error(
                409, "the object has been modified; please apply your changes to the latest version"
            )
        if status:
            patched = copy.deepcopy(current)
            patched["status"] = _merge(
                current.get("status") or {}, body.get("status") or {}, strategic=strategic
            )
        else:
            patched = _merge(current, {k: v for k, v in body.items() if k != "status"}, strategic=strategic)
        patched = _admit(key[0], patched, current)
        patched["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[key] = patched
        return copy.deepcopy(patched)

    def _stamp(self, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta["resourceVersion"] = str(next(self._versions))
        return obj


def _check_uid(current: Obj, options: Any) -> None:
    """A delete (or eviction) with ``preconditions.uid`` answers 409 when the object is another
    one by now (a pod of the same name that a StatefulSet re-created)."""
    uid = ((options or {}).get("preconditions") or {}).get("uid")
    if uid is not None and uid != current["metadata"]["uid"]:
        raise api_error(
            409,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
            f"{current['metadata']['uid']}",
        )


def _as_client_type(annotation: Any, result: Any) -> Any:
    """The answer as the client returns it: its model for built-in kinds, a dict for custom ones."""
    model = getattr(client, annotation, None) if isinstance(annotation, str) else annotation
    if isinstance(model, type) and issubclass(model, BaseModel) and isinstance(result, dict):
        return model.from_dict(result)  # type: ignore[attr-defined]
    return result


@dataclass(frozen=True)
class PostedEvent:
    type: str
    reason: str
    message: str
    involved: str  # namespace/name of the object the event is about


@dataclass
class EventLog:
    """What ``kopf.event`` would have posted (it needs a running operator to post anything)."""

    events: list[PostedEvent] = field(default_factory=list)

    def post(
        self,
        objs: kopf.Body | Iterable[kopf.Body],
        *,
        type: str,
        reason: str,
        message: str = "",
        backoffs: Any = None,
    ) -> None:
        for body in [objs] if isinstance(objs, Mapping) else list(objs):
            meta = body["metadata"]
            involved = f"{meta.get('namespace')}/{meta.get('name')}"
            self.events.append(PostedEvent(type, reason, message, involved))

    def reasons(self) -> list[tuple[str, str]]:
        return [(e.type, e.reason) for e in self.events]
