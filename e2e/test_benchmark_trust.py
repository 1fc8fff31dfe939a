"""What a benchmark's results can be trusted for, tried on the real control plane as a hostile
but fair user would: forged and copied shard results never merge, a run's pods can touch only
that run's result objects, and a credential given by reference appears nowhere the operator
writes."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any

import yaml

from mcp_bench.results.document import dumps_document, loads_document
from mcp_devcluster import stack

LOCAL = {"nodeSelector": {"mcp2026.io/local-runner": "true"}}
CANARY = "canary-7f3e9c1d-T0KEN"
SHOWN = "shown-2b8a4e"  # a value a spec may carry (a query's, a literal header's), seen by no one else
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _bench(refserver: str, **extra: Any) -> dict[str, Any]:
    return {
        "target": {"url": refserver, "backend": "http", "path": "/health"},
        "load": {"concurrency": [1], "requests": 20},
        "shards": 2,
        "runner": LOCAL,
        **extra,
    }


def _state(kube: Any, name: str, operator: Any) -> str:
    obj = kube.run("get", "mcpbenchmark", name, "-o", "yaml", check=False).stdout
    maps = kube.run("get", "configmaps", "-o", "wide", check=False).stdout
    return f"{obj}\n{maps}\noperator log: {operator.process.log_tail(3000)}"


def _rejected(kube: Any, name: str, operator: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The benchmark's status and Ready condition once it is judged not Ready, and not a Pass."""
    waited = kube.wait(f"mcpbenchmark/{name}", "condition=Ready=false", timeout_s=90)
    assert waited.returncode == 0, _state(kube, name, operator)
    status = kube.get("mcpbenchmark", name)["status"]
    ready = stack.condition_of({"status": status})
    assert ready["reason"] == "ShardResultRejected" and status["verdict"] != "Pass"
    return status, ready


@contextlib.contextmanager
def _finished_without_operator(
    kube: Any, operator: Any, tmp_path: Any, name: str, spec: dict[str, Any]
) -> Iterator[str]:
    """Run the benchmark with the operator stopped while its shards run, so nothing is collected
    before the body (the tampering) is done; yields the Job's name once it is Complete, and
    starts the operator again after the body. The run goes without the start barrier: no operator
    writes level start times meanwhile (test_benchmark_barrier.py covers it)."""
    kube.apply(stack.custom_resource("MCPBenchmark", name, {**spec, "startBarrier": {"enabled": False}}))
    assert kube.wait(f"mcpbenchmark/{name}", "jsonpath={.status.phase}=Running").returncode == 0
    job = kube.get("mcpbenchmark", name)["status"]["jobName"]
    stack.stop(operator.process)
    try:
        assert kube.wait(f"job/{job}", "condition=Complete", timeout_s=90).returncode == 0
        yield job
    finally:
        replacement = stack.start_operator(kube.kubeconfig, tmp_path)
        operator.process = replacement.process  # the session fixture stops whichever runs last
        operator.metrics_url = replacement.metrics_url


def test_forged_and_copied_shard_results_are_rejected_not_merged(
    kube: Any, refserver: str, operator: Any, tmp_path: Any
) -> None:
    with _finished_without_operator(kube, operator, tmp_path, "forged", _bench(refserver)) as job:
        shard0 = kube.get("configmap", f"{job}-shard-0")
        genuine = shard0["data"]["result.json"]
        # an extra result for an index the run does not have, with a recomputed CRC-32C
        forged_doc = loads_document(genuine)
        forged_doc.shard_index = 7
        extra = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{job}-shard-7",
                "labels": shard0["metadata"]["labels"],
                "ownerReferences": shard0["metadata"]["ownerReferences"],
            },
            "data": {"result.json": dumps_document(forged_doc)},
        }
        kube.apply(json.dumps(extra))
        # shard 0's genuine, signed document copied over shard 1's
        kube.run(
            "patch",
            "configmap",
            f"{job}-shard-1",
            "--type=merge",
            "-p",
            json.dumps({"data": {"result.json": genuine}}),
        )
    status, ready = _rejected(kube, "forged", operator)
    assert status["shards"]["reported"] == 1 and status["shards"]["rejected"] == 2
    assert f"{job}-shard-7" in ready["message"] and "unexpected result object" in ready["message"]
    assert f"{job}-shard-1" in ready["message"] and "holds shard 0's result" in ready["message"]
    # only shard 0's requests are in the figures: not counted twice, nor three times
    assert status["results"][0]["requests"] == loads_document(genuine).levels[0].completed
    # one event per rejected object, naming it, beside the verdict's own event
    rejected = [e["message"] for e in kube.events("forged") if e["reason"] == "ShardResultRejected"]
    assert {m.split(":")[0] for m in rejected if m.startswith(job)} == {f"{job}-shard-1", f"{job}-shard-7"}


def _secret_reader(kube: Any) -> str:
    """A user who may read Secrets and write ConfigMaps in the namespace, and nothing else (no
    pods, no pods/log, no exec): the ``--as`` argument that acts as them."""
    rules = [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"]},
    ]
    kube.run("create", "serviceaccount", "secret-reader")
    kube.apply(
        json.dumps(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "secret-reader"},
                "rules": rules,
            }
        )
    )
    kube.run(
        "create",
        "rolebinding",
        "secret-reader",
        "--role=secret-reader",
        f"--serviceaccount={kube.namespace}:secret-reader",
    )
    return f"--as=system:serviceaccount:{kube.namespace}:secret-reader"


def test_a_secret_reader_s_re_signed_result_is_rejected(
    kube: Any, refserver: str, operator: Any, tmp_path: Any
) -> None:
    """The run's key signs, so whoever reads its Secret can re-sign a result (completed x 10 was
    accepted before); only the shard's container writes its log, where it attests the document
    it stored, and the operator reads that log back from the kubelet."""
    reader = _secret_reader(kube)
    with _finished_without_operator(kube, operator, tmp_path, "resigned", _bench(refserver)) as job:
        secret = json.loads(kube.run("get", "secret", f"{job}-key", "-o", "json", reader).stdout)
        key = base64.b64decode(secret["data"]["hmac-sha256-key"])
        genuine = json.loads(kube.run("get", "configmap", f"{job}-shard-0", "-o", "json", reader).stdout)
        doc = loads_document(genuine["data"]["result.json"], key)
        for level in doc.levels:
            level.completed *= 10
        forged = dumps_document(doc, key)
        loads_document(forged, key)  # a valid signature: the key alone would accept it
        patch = json.dumps({"data": {"result.json": forged}})
        kube.run("patch", "configmap", f"{job}-shard-0", "--type=merge", "-p", patch, reader)
        assert kube.run("logs", "-l", f"job-name={job}", reader, check=False).returncode != 0
    status, ready = _rejected(kube, "resigned", operator)
    assert status["shards"]["reported"] == 1 and status["shards"]["rejected"] == 1
    assert f"{job}-shard-0 (the pod's log attests another document)" in ready["message"]
    shard1 = loads_document(kube.get("configmap", f"{job}-shard-1")["data"]["result.json"])
    assert status["results"][0]["requests"] == shard1.levels[0].completed  # none of the forged 10x
    # the rejected object's own event, beside the verdict's
    rejected = [e["message"] for e in kube.events("resigned") if e["reason"] == "ShardResultRejected"]
    assert {m for m in rejected if m.startswith(job)} == {
        f"{job}-shard-0: the pod's log attests another document"
    }
    # what the shard attested is the document it stored, as its log says to anyone who may read it
    pods = json.loads(kube.run("get", "pods", "-l", f"job-name={job}", "-o", "json").stdout)["items"]
    (pod,) = [p for p in pods if p["metadata"]["annotations"][COMPLETION_INDEX] == "0"]
    log = kube.run("logs", pod["metadata"]["name"]).stdout
    digest = hashlib.sha256(genuine["data"]["result.json"].encode()).hexdigest()
    assert f"mcp-shard-result sha256={digest}" in log.splitlines()


def _can(kube: Any, account: str, verb: str, resource: str) -> str:
    result = stack.kubectl(
        kube.kubeconfig,
        "auth",
        "can-i",
        verb,
        resource,
        "-n",
        kube.namespace,
        f"--as=system:serviceaccount:{kube.namespace}:{account}",
        check=False,
    )
    return str(result.stdout.strip())


def test_a_run_s_pods_can_touch_only_that_run_s_result_objects(kube: Any, refserver: str) -> None:
    kube.apply(stack.custom_resource("MCPBenchmark", "first", _bench(refserver)))
    kube.apply(stack.custom_resource("MCPBenchmark", "second", _bench(refserver, shards=1)))
    kube.run("create", "configmap", "app-config", "--from-literal=mode=production")
    for name in ("first", "second"):
        assert kube.wait(f"mcpbenchmark/{name}", "condition=Ready", timeout_s=120).returncode == 0
    first = kube.get("mcpbenchmark", "first")
    job = first["status"]["jobName"]
    other = kube.get("mcpbenchmark", "second")["status"]["jobName"]
    account = f"{job}-shard"
    allowed = {
        ("get", f"configmap/{job}-shard-0"),
        ("update", f"configmap/{job}-shard-1"),
        ("patch", f"configmap/{job}-shard-0"),
    }
    denied = {
        ("create", "configmaps"),
        ("list", "configmaps"),
        ("watch", "configmaps"),
        ("get", "configmap/app-config"),
        ("update", "configmap/app-config"),
        ("patch", "configmap/app-config"),
        ("delete", f"configmap/{job}-shard-0"),
        ("get", f"configmap/{job}-shard-2"),  # an index the run does not have
        ("update", f"configmap/{other}-shard-0"),  # another benchmark's result
        ("get", f"configmap/{first['metadata']['name']}-report"),
        ("get", f"secret/{job}-key"),  # the key reaches the pod by reference, read by the kubelet
        ("list", "secrets"),
        ("create", "pods"),
    }
    for verb, resource in allowed:
        assert _can(kube, account, verb, resource) == "yes", (verb, resource)
    for verb, resource in denied:
        assert _can(kube, account, verb, resource) == "no", (verb, resource)
    assert _can(kube, f"{other}-shard", "update", f"configmap/{job}-shard-0") == "no"

    # the run's account, Role, RoleBinding, key and results go with the benchmark
    kube.run("delete", "mcpbenchmark", "first", "--wait=true", "--timeout=60s")
    children = [
        ("serviceaccount", account),
        ("role", account),
        ("rolebinding", account),
        ("secret", f"{job}-key"),
        ("configmap", f"{job}-shard-0"),
        ("configmap", f"{job}-shard-1"),
    ]
    deadline = time.monotonic() + 120  # the garbage collector's discovery of a new owner kind
    while time.monotonic() < deadline:
        left = [c for c in children if kube.run("get", *c, check=False).returncode == 0]
        if not left:
            break
        time.sleep(1)
    assert not left, left


def test_a_credential_given_by_reference_appears_nowhere_the_operator_writes(
    kube: Any, refserver: str, operator: Any
) -> None:
    """A credential goes in a Secret; a URL or a literal header that carries one, by any of the
    names it goes by, is refused at apply, naming the field. What the spec may carry in a query
    or a literal header (``?model=...``, ``X-Tenant``) is the user's to see in their spec and
    the run's to read from its own Secret; it is in no status, event, Job, pod, ConfigMap or log
    line: known by position, not by name (issue 35, item 1)."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "endpoint-auth"},
        "data": {"bearer": base64.b64encode(f"Bearer {CANARY}".encode()).decode()},
    }
    kube.apply(json.dumps(secret))
    # a URL that carries the credential itself is refused before it is stored anywhere
    for url in (
        refserver.replace("http://", f"http://user:{CANARY}@"),
        f"{refserver}/health?token={CANARY}",
        f"{refserver}/health?a=1&api_key={CANARY}",
        f"{refserver}/health#access_token={CANARY}",
        f"{refserver}/health?token[]={CANARY}",
        f"{refserver}/health?jwt={CANARY}",
        f"{refserver}/health?accessToken={CANARY}",
        f"{refserver}/health?apiToken={CANARY}",
        f"{refserver}/health;token={CANARY}",
    ):
        spec = _bench(refserver)
        spec["target"] = {"url": url, "path": "/health"}
        refused = kube.apply(stack.custom_resource("MCPBenchmark", "in-url", spec), check=False)
        assert refused.returncode != 0 and "CredentialsInUrl" in refused.stderr, (url, refused.stderr)
        assert "spec.target.url" in refused.stderr  # (the API server echoes the value to its sender alone)
    # and a header named like a credential takes no literal value
    spec = _bench(refserver)
    spec["target"]["headers"] = [{"name": "Authorization", "value": f"Bearer {CANARY}"}]
    refused = kube.apply(stack.custom_resource("MCPBenchmark", "in-header", spec), check=False)
    assert refused.returncode != 0 and "CredentialsInHeader" in refused.stderr, refused.stderr
    assert "spec.target.headers[0]" in refused.stderr

    spec = _bench(refserver)
    spec["target"]["url"] = f"{refserver}/?model={SHOWN}"
    spec["target"]["headers"] = [
        {"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "endpoint-auth", "key": "bearer"}}},
        {"name": "X-Tenant", "value": f"team-{SHOWN}"},
    ]
    kube.apply(stack.custom_resource("MCPBenchmark", "with-auth", spec))
    assert kube.wait("mcpbenchmark/with-auth", "condition=Complete", timeout_s=120).returncode == 0
    obj = kube.get("mcpbenchmark", "with-auth")
    stack.passed_or_flagged_apart(obj)  # a busy host may start one shard late: flagged, not failed
    status = obj["status"]
    assert status["shards"]["reported"] == 2
    job = kube.get("job", status["jobName"])
    env = {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MCP_HEADER_0"]["valueFrom"] == {"secretKeyRef": {"name": "endpoint-auth", "key": "bearer"}}
    assert "value" not in env["MCP_HEADER_0"]
    assert env["MCP_BENCH_PLAN"]["valueFrom"]["secretKeyRef"]["name"] == f"{status['jobName']}-key"

    statuses = [
        item["status"]
        for item in yaml.safe_load(kube.run("get", "mcpbenchmarks", "-o", "json").stdout)["items"]
    ]
    written = {
        "status": json.dumps(statuses),
        "events": kube.run("get", "events", "-o", "json").stdout,
        "jobs": kube.run("get", "jobs", "-o", "json").stdout,
        "pods": kube.run("get", "pods", "-o", "json").stdout,
        "configmaps": kube.run("get", "configmaps", "-o", "json").stdout,
        "operator log": operator.process.log_tail(5_000_000),
    }
    for what, text in written.items():
        assert text and CANARY not in text and SHOWN not in text, what
    # the shard results and the report name the literal header, its value hidden
    report = loads_document(kube.get("configmap", status["reportName"])["data"]["result.json"])
    assert report.plan.payload.headers == {"X-Tenant": "REDACTED"}
    assert status["targetUrl"] == f"{refserver}/health?model=REDACTED"
