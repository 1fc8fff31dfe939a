"""Types shared by both custom resources: conditions, verdicts, and the model base class.

The pydantic models are the single source of truth for the CRDs (``mcp_operator.crdgen``
turns them into openAPIV3Schema), so field descriptions here become ``kubectl explain``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from pydantic.alias_generators import to_camel

from mcp_checks.verdict import Verdict

GROUP = "mcp2026.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "ApiModel",
    "Condition",
    "TargetRef",
    "Verdict",
    "cel",
    "with_rules",
]


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are errors, not silently dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", use_enum_values=True
    )

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")

    def to_patch(self) -> dict[str, Any]:
        """Only the fields that were set: a status patch built through the model (so every field
        is one the CRD declares) that leaves the others as they are."""
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")


def with_rules(*rules: dict[str, JsonValue]) -> ConfigDict:
    """The base model config plus CEL rules that the CRD carries on this object."""
    config = ConfigDict(**ApiModel.model_config)
    config["json_schema_extra"] = {"x-kubernetes-validations": [dict(rule) for rule in rules]}
    return config


def cel(rule: str, message: str, field_path: str | None = None) -> dict[str, JsonValue]:
    """One ``x-kubernetes-validations`` entry for cross-field rules the API server enforces."""
    entry: dict[str, JsonValue] = {"rule": rule, "message": message}
    if field_path:
        entry["fieldPath"] = field_path
    return entry


class Condition(ApiModel):
    """A Kubernetes-convention condition."""

    type: str = Field(description="Condition type, e.g. Ready or Accepted.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(description="CamelCase reason for the last transition.")
    message: str = Field(default="", description="Human readable explanation.")
    last_transition_time: str = Field(description="When status last changed (RFC 3339).")
    observed_generation: int | None = Field(default=None, description="Generation the condition reflects.")


class TargetRef(ApiModel):
    """An in-cluster Service, resolved to a URL by the operator (its existence is checked)."""

    name: str = Field(description="Service name.", min_length=1, max_length=63)
    namespace: str | None = Field(default=None, description="Service namespace; defaults to the resource's.")
    port: int = Field(default=80, ge=1, le=65535, description="Service port.")
    scheme: Literal["http", "https"] = Field(default="http", description="URL scheme.")
