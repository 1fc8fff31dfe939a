"""What the serving GPUs' samplers ask of the API server: the nodes of the target's endpoints,
each node's GPU count, the sampler pods and Services created (owned by the MCPBenchmark), and
their deletion once the run is collected. The manifests come from ``benchmark.gpusampler``."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from mcp_bench.api import RunPlan

from .. import access, kube
from ..api.benchmark import MCPBenchmarkSpec
from ..api.common import TargetRef
from ..targets import SpecProblem
from .contract import LABEL_BENCHMARK_UID, LABEL_COMPONENT, LABEL_JOB
from .gpusampler import (
    COMPONENT_SAMPLER,
    node_gpus,
    sampler_name,
    sampler_pod,
    sampler_service,
    sampler_url,
    serving_nodes,
)


def sampler_ref(spec: MCPBenchmarkSpec) -> TargetRef | None:
    """The Service whose pods' nodes get a sampler: the sampler's own, else the target's."""
    sampler = spec.observe.gpu_sampler if spec.observe else None
    if sampler is None:
        return None
    return sampler.service_ref or spec.target.service_ref


def _plain(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = kube.api_client().sanitize_for_serialization(obj)
    return out


async def nodes_of_service(namespace: str, name: str) -> list[str]:
    """The nodes the Service's endpoints (ready or not) run on."""
    slices = await kube.call(
        client.DiscoveryV1Api(kube.api_client()).list_namespaced_endpoint_slice,
        namespace,
        label_selector=f"kubernetes.io/service-name={name}",
    )
    return serving_nodes(_plain(s) for s in slices.items)


async def gpus_of_node(node: str) -> int:
    """GPUs the node advertises; 0 when it cannot be read (the sampler then finds none itself)."""
    try:
        obj = await kube.call(kube.core().read_node, node)
    except ApiException as exc:
        if exc.status in (403, 404):
            return 0
        raise
    return node_gpus(_plain(obj))


async def _service_url(namespace: str, manifest: dict[str, Any]) -> str:
    core = kube.core()
    try:
        created = await kube.call(core.create_namespaced_service, namespace, manifest)
    except ApiException as exc:
        if exc.status != 409:
            raise
        created = await kube.call(core.read_namespaced_service, manifest["metadata"]["name"], namespace)
    return sampler_url(_plain(created), namespace)


# the rights of the mcp-operator-gpu-sampler ClusterRole, asked before anything is created
SAMPLER_RIGHTS = (access.Right("create", "pods"), access.Right("create", "services"))


async def place_samplers(
    *,
    spec: MCPBenchmarkSpec,
    namespace: str,
    benchmark: str,
    uid: str,
    job: str,
    image: str,
) -> list[str] | SpecProblem:
    """One sampler (pod and Service) per node of the target's endpoints; their URLs for the plan."""
    sampler = spec.observe.gpu_sampler if spec.observe else None
    ref = sampler_ref(spec)
    if sampler is None or ref is None:
        return []
    lacking = await access.missing(kube.authz(), namespace, SAMPLER_RIGHTS)
    if lacking:
        shown = ", ".join(r.shown(namespace) for r in lacking)
        return SpecProblem(
            "GpuSamplerNotPermitted",
            f"spec.observe.gpuSampler: the operator may not {shown}: sampler pods run only where the "
            "namespace's owner binds the ClusterRole mcp-operator-gpu-sampler (<release>-gpu-sampler "
            f"from the Helm chart) to the operator's ServiceAccount (kubectl -n {namespace} create "
            "rolebinding mcp-operator-gpu-sampler --clusterrole=mcp-operator-gpu-sampler "
            "--serviceaccount=<operator namespace>:<operator account>)",
        )
    ns = ref.namespace or namespace
    nodes = await nodes_of_service(ns, ref.name)
    if not nodes:
        return SpecProblem(
            "ServingNodesNotFound",
            f"spec.observe.gpuSampler: no endpoint of Service {ns}/{ref.name} names a node yet",
        )
    gpus = await asyncio.gather(*(gpus_of_node(n) for n in nodes))
    urls = []
    for node, count in zip(nodes, gpus, strict=True):
        pod = sampler_pod(
            benchmark=benchmark,
            uid=uid,
            job=job,
            node=node,
            gpus=count,
            spec=sampler,
            image=image,
            clients=spec.shards,
            deadline_s=spec.runner.active_deadline_seconds,
        )
        await kube.create_or_exists(kube.core().create_namespaced_pod, namespace, pod)
        service = sampler_service(benchmark=benchmark, uid=uid, job=job, node=node)
        urls.append(await _service_url(namespace, service))
    return urls


async def delete_samplers(namespace: str, job: str, uid: str, *, replaced: bool = False) -> int:
    """Delete the run's sampler pods and Services (done with, or the run is over); how many.
    With ``replaced``: every sampler of the benchmark ``uid`` *but* ``job``'s (the runs a new spec
    replaced). Labels only find candidates: an object is deleted only if the benchmark owns it,
    so a pod that merely carries the labels is left alone."""
    core = kube.core()
    selector = f"{LABEL_JOB}={job},{LABEL_COMPONENT}={COMPONENT_SAMPLER}"
    if replaced:
        selector = f"{LABEL_BENCHMARK_UID}={uid},{LABEL_JOB}!={job},{LABEL_COMPONENT}={COMPONENT_SAMPLER}"
    pods = await kube.call(core.list_namespaced_pod, namespace, label_selector=selector)
    services = await kube.call(core.list_namespaced_service, namespace, label_selector=selector)
    deleted = 0
    for delete, items in (
        (core.delete_namespaced_pod, pods.items),
        (core.delete_namespaced_service, services.items),
    ):
        for item in items:
            if not any(ref.uid == uid for ref in item.metadata.owner_references or []):
                continue
            try:
                await kube.call(delete, item.metadata.name, namespace)
                deleted += 1
            except ApiException as exc:
                if exc.status != 404:
                    raise
    return deleted


async def with_gpu_samplers(
    plan: RunPlan, spec: MCPBenchmarkSpec, *, namespace: str, benchmark: str, uid: str, job: str, image: str
) -> RunPlan | SpecProblem:
    """The plan with its serving GPUs' sampler URLs once they are placed (the plan as it is
    without spec.observe.gpuSampler); a refused sampler pod or Service is ``ChildRejected``."""
    try:
        urls = await place_samplers(
            spec=spec, namespace=namespace, benchmark=benchmark, uid=uid, job=job, image=image
        )
    except ApiException as exc:
        if exc.status is None or not 400 <= exc.status < 500 or exc.status in (408, 409, 429):
            raise
        return SpecProblem(
            "ChildRejected", f"a GPU sampler was refused ({exc.status}): {kube.api_message(exc)}"
        )
    if isinstance(urls, SpecProblem) or not urls:
        return plan if not isinstance(urls, SpecProblem) else urls
    observe = plan.observe.model_copy(update={"gpu_samplers": urls})
    return plan.model_copy(update={"observe": observe})


__all__ = ["delete_samplers", "place_samplers", "sampler_name", "sampler_ref", "with_gpu_samplers"]
