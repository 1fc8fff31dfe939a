"""Types shared by both custom resources: conditions, verdicts, and the model base class.

The pydantic models are the single source of truth for the CRDs (``mcp_operator.crdgen``
turns them into openAPIV3Schema), so field descriptions here become ``kubectl explain``.
"""

from __future__ import annotations

from collections.abc import Iterable
from copy import copy
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator
from pydantic.alias_generators import to_camel

from mcp_checks.models import ConditionRow, StatusPart, Verdict
from mcp_common.labels import LABEL_VALUE as LABEL_VALUE  # re-exported: the API models read it here
from mcp_common.labels import LabelValue as LabelValue

from ..redact import SECRET_NAME, sensitive_param

GROUP = "mcp2026.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
# what our events are signed with: kopf's poster (handlers.startup) and the verdict events a new
# leader posts itself (readiness.verdictevents) alike
REPORTING_COMPONENT = "mcp-operator"

__all__ = [
    "API_VERSION",
    "GROUP",
    "REPORTING_COMPONENT",
    "VERSION",
    "ApiModel",
    "Condition",
    "HeaderValueSource",
    "SecretKeyRef",
    "TargetHeader",
    "TargetRef",
    "Verdict",
    "cel",
    "with_rules",
]


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are errors, not silently dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_enum_values=True,
        defer_build=True,  # validators built on first use: the operator process never uses most
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


class Condition(ConditionRow, ApiModel):
    __doc__ = ConditionRow.__doc__  # its fields: ``mcp_checks.status.ConditionRow``, as readers see it


def field_of(model: type[BaseModel], name: str) -> Any:
    """The field ``name`` of ``model`` (its default, bounds and description), for a model that
    declares it again with a narrower type or reads only part of a status: the field stays
    declared once."""
    return copy(model.model_fields[name])


def condition_rows(conditions: Iterable[Condition]) -> list[dict[str, Any]]:
    """Conditions read through the model, as the status held them (no default added): what the
    builders that set one (``mcp_operator.conditions``) extend."""
    return [c.to_patch() for c in conditions]


class Conditioned(StatusPart):
    """The conditions of either resource's status, and nothing else of it: what code shared by
    both resources reads (a wait for names, a refusal)."""

    conditions: list[Condition] = Field(default_factory=list)

    def condition_rows(self) -> list[dict[str, Any]]:
        return condition_rows(self.conditions)


class TargetRef(ApiModel):
    """An in-cluster Service, resolved to a URL by the operator (its existence is checked)."""

    name: str = Field(description="Service name.", min_length=1, max_length=63)
    namespace: str | None = Field(default=None, description="Service namespace; defaults to the resource's.")
    port: int = Field(default=80, ge=1, le=65535, description="Service port.")
    scheme: Literal["http", "https"] = Field(default="http", description="URL scheme.")


# Kubernetes' own name rules, so the API server refuses what a child object would be refused for
# (no backslashes: the same text serves as an OpenAPI pattern and inside CEL string literals)
DNS_SUBDOMAIN_BODY = "[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
DNS_SUBDOMAIN = f"^{DNS_SUBDOMAIN_BODY}$"
QUALIFIED_NAME = f"^({DNS_SUBDOMAIN_BODY}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{{0,61}}[A-Za-z0-9])?$"
# a Kubernetes quantity, non-negative: 2, 500m, 1.5, 8Gi, 1e3
# a Kubernetes quantity; an exponent of at most two digits (1e99 is past any machine already, and
# 9e999999 overflowed every sum the operator makes of requests)
QUANTITY = "^([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][-+]?[0-9]{1,2}|[numkMGTPE]|[KMGTPE]i)?$"
INT32_MAX = 2**31 - 1
SECRET_DATA_KEY = r"^[-._a-zA-Z0-9]+$"
HTTP_HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$"
MAX_HEADERS = 16


class SecretKeyRef(ApiModel):
    """One key of a Secret in the resource's namespace."""

    name: str = Field(description="Secret name.", min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)
    key: str = Field(
        description="Key in the Secret's data.", min_length=1, max_length=253, pattern=SECRET_DATA_KEY
    )


class HeaderValueSource(ApiModel):
    secret_key_ref: SecretKeyRef = Field(
        description="Read at run time by whoever sends the requests; never copied into any object."
    )


CREDENTIAL_HEADER_HINT = (
    "a header whose name marks a credential (Authorization, Cookie, X-Api-Key, *-Token, ...) takes its "
    "value from a Secret, valueFrom.secretKeyRef, never a literal value: a literal is stored in the "
    "object and the run's Secret (CredentialsInHeader)"
)


class TargetHeader(ApiModel):
    """An HTTP header sent with every request: a literal value, or a Secret key for credentials
    (a header named like one, by the words of ``mcp_common.redact.SECRET_NAME``, takes no literal)."""

    model_config = with_rules(
        cel("has(self.value) != has(self.valueFrom)", "set exactly one of value and valueFrom"),
        cel(f"!has(self.value) || !('?' + self.name + '=').matches('{SECRET_NAME}')", CREDENTIAL_HEADER_HINT),
    )

    name: str = Field(
        description="Header name, e.g. Authorization.", min_length=1, max_length=256, pattern=HTTP_HEADER_NAME
    )
    value: str | None = Field(
        default=None,
        description="Literal value, for a header that carries no credential; it is stored in the run's "
        "Secret for the shards and shown as REDACTED in results and reports.",
        max_length=8192,
    )
    value_from: HeaderValueSource | None = Field(default=None, description="Value from a Secret key.")

    @model_validator(mode="after")
    def _one_source(self) -> TargetHeader:
        if (self.value is None) == (self.value_from is None):
            raise ValueError("set exactly one of value and valueFrom")
        if self.value is not None and sensitive_param(self.name):
            raise ValueError(f"header {self.name}: {CREDENTIAL_HEADER_HINT}")
        return self
