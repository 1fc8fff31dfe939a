"""spec.runner of an MCPBenchmark: where the shard pods run (node selector, tolerations, runtime
class, service account) and what they request."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator

from .common import DNS_SUBDOMAIN, INT32_MAX, LABEL_VALUE, QUALIFIED_NAME, QUANTITY, ApiModel, cel, with_rules

MAX_NODE_SELECTOR = 32


class Toleration(ApiModel):
    """A pod toleration, as Kubernetes defines it (e.g. for the nvidia.com/gpu taint)."""

    model_config = with_rules(
        cel(
            "!has(self.value) || self.value == '' || !has(self.operator) || self.operator != 'Exists'",
            "value must be empty when operator is Exists",
        ),
        cel(
            "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
            "tolerationSeconds applies to effect NoExecute only",
        ),
    )

    key: str | None = Field(
        default=None,
        description="Taint key to tolerate; empty with Exists: all.",
        max_length=317,
        pattern=f"^$|{QUALIFIED_NAME}",
    )
    operator: Literal["Exists", "Equal"] | None = Field(
        default=None, description="Exists, or Equal to compare the value (default Equal)."
    )
    value: str | None = Field(
        default=None, description="Taint value, with operator Equal.", max_length=63, pattern=LABEL_VALUE
    )
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect to tolerate; empty: all effects."
    )
    toleration_seconds: int | None = Field(
        default=None, description="With NoExecute: how long the pod stays once the taint appears."
    )


class RunnerSpec(ApiModel):
    """Where and how the shard pods run."""

    model_config = with_rules(
        cel(
            "!has(self.memoryLimit) || !has(self.memory) || "
            "!quantity(self.memoryLimit).isLessThan(quantity(self.memory))",
            "memoryLimit must not be below memory (the request)",
            ".memoryLimit",
        ),
    )

    image: str | None = Field(
        default=None,
        description="Runner image; unset uses the operator's runner image (its MCP_RUNNER_IMAGE).",
        min_length=1,
        max_length=1024,
        pattern=r"^[^\s]+$",
    )
    gpus: int = Field(default=0, ge=0, le=16, description="nvidia.com/gpu per shard pod.")
    cpu: str = Field(
        default="1",
        description="CPU request per shard pod (a quantity: 2, 500m).",
        max_length=64,
        pattern=QUANTITY,
    )
    memory: str = Field(
        default="1Gi",
        description="Memory request per shard pod (a quantity: 512Mi, 8Gi).",
        max_length=64,
        pattern=QUANTITY,
    )
    memory_limit: str | None = Field(
        default=None,
        description="Memory limit per shard pod (a quantity, at least memory); unset: no limit. A shard "
        "killed at it ends the run with Ready False, reason ShardFailed, naming the pod and OOMKilled.",
        max_length=64,
        pattern=QUANTITY,
    )
    node_selector: dict[str, Annotated[str, Field(max_length=63, pattern=LABEL_VALUE)]] = Field(
        default_factory=dict,
        description="Node labels the shards need (keys are qualified names, values label values).",
        max_length=MAX_NODE_SELECTOR,
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    f"self.all(k, k.size() <= 317 && k.matches('{QUALIFIED_NAME}'))",
                    "nodeSelector keys must be qualified names: [prefix/]name, name at most 63 characters "
                    "of alphanumerics, '-', '_' and '.'",
                )
            ]
        },
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Tolerations of the shard pods.", max_length=32
    )
    runtime_class_name: str | None = Field(
        default=None, description="RuntimeClass, e.g. nvidia.", max_length=253, pattern=DNS_SUBDOMAIN
    )
    service_account_name: str | None = Field(
        default=None,
        description="Service account of the shards; default: one the operator creates for the run. Either "
        "way the run's Role (update of this run's result ConfigMaps only) is bound to it.",
        max_length=253,
        pattern=DNS_SUBDOMAIN,
    )
    active_deadline_seconds: int = Field(
        default=3600, ge=1, le=INT32_MAX, description="Hard limit for the whole Job."
    )
    backoff_limit: int = Field(default=0, ge=0, le=10, description="Retries of a failed shard.")

    @field_validator("node_selector")
    @classmethod
    def _qualified_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if len(key) > 317 or not re.match(QUALIFIED_NAME, key):
                raise ValueError(f"nodeSelector key {key!r} is not a qualified name ([prefix/]name)")
        return value
