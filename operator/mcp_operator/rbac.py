"""The operator's RBAC rules: one definition, written into the kustomize base and overlay and the
Helm chart by ``mcp-operator crds`` (a drift test keeps them in step with these lists).

Rights come in parts, so that an install grants only what its users chose:

- ``CLUSTER_RULES``: cluster-scoped reads (CRDs for kopf's discovery, namespaces for their
  labels, nodes for shard placement). Bound cluster-wide in every install.
- ``WORK_RULES``: what benchmarks and gates need in a namespace they run in. A cluster-wide
  install binds them everywhere (a ClusterRole); a namespaced install (``--namespace``, the
  chart's ``watchNamespaces``, ``manifests/overlays/namespaced``) puts them in a Role in each
  watched namespace and nowhere else.
- ``FAULT_RULES``: what drill faults change (pods killed, Deployments scaled or restarted, Chaos
  Mesh experiments). Never bound by an install: a namespace opts in with a RoleBinding of the
  ``mcp-operator-faults`` ClusterRole that its owner creates (besides the namespace label the
  operator checks), so the operator cannot break anything anywhere else.
- ``NODE_FAULT_RULES``: cordoning nodes (``zoneOutage``, ``nodeDrain``), cluster-scoped, bound
  only by a ClusterRoleBinding an admin creates.
- ``GPU_SAMPLER_RULES``: the privileged sampler pods of ``spec.observe.gpuSampler`` and their
  Services, opted into per namespace like faults.
- ``LEASE_RULES``: a Role in the operator's own namespace for the leader Lease (``leadership``),
  so the operator cannot touch any other Lease (the nodes' heartbeats, other controllers').

Before it acts, the operator asks the API server whether it holds a right it needs there
(``access``), so a missing binding is a condition naming it, not a 403 half way through.
"""

from __future__ import annotations

from typing import Any

from .api.common import GROUP

PLURALS = ["mcpreadinesses", "mcpbenchmarks"]
Rule = dict[str, Any]

CLUSTER_RULES: list[Rule] = [
    # kopf: resource discovery; namespaces for cluster-wide watching and for their labels (the
    # fault opt-in); nodes for shard placement (preflight) and the GPU samplers' nodes
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
]

WORK_RULES: list[Rule] = [
    # our resources and their status
    {"apiGroups": [GROUP], "resources": PLURALS, "verbs": ["get", "list", "watch", "patch", "update"]},
    # a drill's stage load as shard Jobs (spec.drill.shards): a benchmark per stage, owned by the
    # gate, replaced by its next drill
    {"apiGroups": [GROUP], "resources": ["mcpbenchmarks"], "verbs": ["create", "delete"]},
    {
        "apiGroups": [GROUP],
        "resources": [f"{p}/status" for p in PLURALS],
        "verbs": ["get", "patch", "update"],
    },
    # events on our objects (listed once by a new leader, which posts a verdict's event the last
    # one died before posting: readiness.verdictevents); the namespace's own object (its labels)
    # in a namespaced install
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "list"]},
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},
    # benchmark shards: the Job, its pods (and what they printed), shard results and report,
    # and the shards' own account
    {
        "apiGroups": ["batch"],
        "resources": ["jobs"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    # pod readiness gates: the verdict as a condition of the gated pods
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    # each run's own account, and its signing key: created, and read back by name to verify the
    # run's results (never listed or watched, so the operator cannot enumerate Secrets)
    {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["get", "create"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create"]},
    {
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles", "rolebindings"],
        "verbs": ["get", "create"],
    },
    # benchmark preflight: whether the namespace's quotas leave room for the shard pods
    {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["list"]},
    # readiness targets given as serviceRef; the GPU samplers' serving nodes
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]},
    # readiness configConsistency: the workload and its ReplicaSets (pods and ConfigMaps above;
    # hashed Secrets are read by name), and the Argo CD Application named by the gate
    {
        "apiGroups": ["apps"],
        "resources": ["deployments", "replicasets", "statefulsets"],
        "verbs": ["get", "list"],
    },
    {"apiGroups": ["argoproj.io"], "resources": ["applications"], "verbs": ["get"]},
    # readiness metricDrift reference: prometheus-operator's PrometheusRules, by name or listed by
    # label (a rules file in a ConfigMap is read with the ConfigMap rule above)
    {"apiGroups": ["monitoring.coreos.com"], "resources": ["prometheusrules"], "verbs": ["get", "list"]},
    # drill planning reads: budgets, so that an eviction a PodDisruptionBudget would refuse is
    # known before anything is touched; the workload's autoscaler (its lag), read only
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list"]},
    {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": ["get", "list"]},
]

CHAOS_KINDS = ["networkchaos", "stresschaos", "podchaos", "iochaos", "httpchaos", "dnschaos", "timechaos"]

FAULT_RULES: list[Rule] = [
    # pods killed through the Eviction API or deleted; Deployments scaled (through the scale
    # subresource) and their pod template stamped (a rollout restart); Chaos Mesh experiments
    # created and deleted on revert
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["patch"]},
    {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get", "patch"]},
    {"apiGroups": ["chaos-mesh.org"], "resources": CHAOS_KINDS, "verbs": ["get", "create", "delete"]},
]

NODE_FAULT_RULES: list[Rule] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
]

GPU_SAMPLER_RULES: list[Rule] = [
    # one sampler pod (no GPU request, privileged to read the node's GPUs) and its Service per
    # serving node, deleted once the run is collected
    {"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["create", "delete"]},
]

# everything a cluster-wide install binds (faults, node faults and samplers excepted)
OPERATOR_RULES: list[Rule] = [*CLUSTER_RULES, *WORK_RULES]

# leader election: the Lease of this installation, in the operator's namespace only (RBAC cannot
# limit create by name; get and update could be, but the Lease's name is a setting)
LEASE_RULES: list[Rule] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
]

# the ClusterRoles of an install, by name suffix ("" is the operator's own)
CLUSTER_ROLES: dict[str, list[Rule]] = {
    "": OPERATOR_RULES,
    "-cluster": CLUSTER_RULES,
    "-faults": FAULT_RULES,
    "-node-faults": NODE_FAULT_RULES,
    "-gpu-sampler": GPU_SAMPLER_RULES,
}


def cluster_role(name: str = "mcp-operator", rules: list[Rule] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": OPERATOR_RULES if rules is None else rules,
    }


def cluster_roles(base: str = "mcp-operator") -> list[dict[str, Any]]:
    """Every ClusterRole of an install; only ``base`` (cluster-wide) or ``base-cluster``
    (namespaced) is bound by the install itself."""
    return [cluster_role(base + suffix, rules) for suffix, rules in CLUSTER_ROLES.items()]


def work_role(namespace: str, name: str = "mcp-operator") -> dict[str, Any]:
    """The Role of a namespaced install in one watched namespace."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": WORK_RULES,
    }


def lease_role(name: str = "mcp-operator-leader") -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name},
        "rules": LEASE_RULES,
    }
