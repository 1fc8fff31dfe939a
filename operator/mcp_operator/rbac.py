"""The operator's RBAC rules: one definition, written into the kustomize base and the Helm chart
by ``mcp-operator crds`` (a drift test keeps both in step with these lists). The ClusterRole does
the work; a Role in the operator's own namespace holds the leader Lease (``leadership``), so the
operator cannot touch any other Lease (the nodes' heartbeats, other controllers' elections)."""

from __future__ import annotations

from typing import Any

from .api.common import GROUP

PLURALS = ["mcpreadinesses", "mcpbenchmarks"]

OPERATOR_RULES: list[dict[str, Any]] = [
    # our resources and their status
    {"apiGroups": [GROUP], "resources": PLURALS, "verbs": ["get", "list", "watch", "patch", "update"]},
    {
        "apiGroups": [GROUP],
        "resources": [f"{p}/status" for p in PLURALS],
        "verbs": ["get", "patch", "update"],
    },
    # kopf: resource discovery, namespaces for cluster-wide watching, events on our objects
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    # benchmark shards: the Job, shard results and report, and the shards' own account
    {
        "apiGroups": ["batch"],
        "resources": ["jobs"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
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
    # benchmark preflight: whether the namespace's quotas leave room for the shard pods (nodes,
    # listed for placement, are below)
    {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": ["list"]},
    # readiness targets given as serviceRef
    {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list"]},
    # benchmark GPU samplers (spec.observe.gpuSampler): the nodes of the target's endpoints, one
    # sampler pod (no GPU request) and its Service per node, deleted once the run is collected
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["pods", "services"], "verbs": ["create", "delete"]},
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
    # drill faults (readiness.faults), only in namespaces labelled for them: pods killed through
    # the Eviction API or deleted, nodes cordoned and uncordoned, Deployments scaled (through
    # the scale subresource) and their pod template stamped; budgets read so that an eviction a
    # PodDisruptionBudget would refuse is known before anything is touched
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "patch"]},
    {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get", "patch"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["get", "list"]},
    # drill measurements: the autoscaler of the workload (its lag), read only
    {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": ["get", "list"]},
    # chaosMesh faults: experiments created in an opted-in namespace and deleted on revert
    {
        "apiGroups": ["chaos-mesh.org"],
        "resources": [
            "networkchaos",
            "stresschaos",
            "podchaos",
            "iochaos",
            "httpchaos",
            "dnschaos",
            "timechaos",
        ],
        "verbs": ["get", "create", "delete"],
    },
]


# leader election: the Lease of this installation, in the operator's namespace only (RBAC cannot
# limit create by name; get and update could be, but the Lease's name is a setting)
LEASE_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
]


def cluster_role(name: str = "mcp-operator") -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": OPERATOR_RULES,
    }


def lease_role(name: str = "mcp-operator-leader") -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name},
        "rules": LEASE_RULES,
    }
