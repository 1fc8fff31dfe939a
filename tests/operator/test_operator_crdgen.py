"""crdgen's conversion of pydantic JSON Schema into structural OpenAPI v3, on small models."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from mcp_operator.api.common import ApiModel, cel, with_rules
from mcp_operator.crdgen import structural_schema


class Inner(ApiModel):
    """Inner object."""

    model_config = with_rules(cel("self.low <= self.high", "low must not exceed high", ".low"))

    low: int = Field(default=0, ge=0)
    high: int = Field(default=10, le=100)


class Outer(ApiModel):
    inner: Inner | None = Field(default=None, description="Optional nested object.")
    ratio: float = Field(default=0.5, gt=0, lt=1)
    labels: dict[str, str] = Field(default_factory=dict)
    free: dict[str, Any] = Field(default_factory=dict, description="Anything goes.")
    items: list[Inner] = Field(default_factory=list)
    name: str | None = None


def test_optional_nested_model_is_inlined_without_ref_or_anyof() -> None:
    schema = structural_schema(Outer)
    inner = schema["properties"]["inner"]
    assert inner["type"] == "object" and inner["description"] == "Optional nested object."
    assert set(inner["properties"]) == {"low", "high"}
    assert "default" not in inner  # a None default is no default
    assert inner["x-kubernetes-validations"] == [
        {"rule": "self.low <= self.high", "message": "low must not exceed high", "fieldPath": ".low"}
    ]
    assert schema["properties"]["items"]["items"]["properties"]["high"] == {
        "default": 10,
        "maximum": 100,
        "type": "integer",
    }
    text = repr(schema)
    for key in ("$ref", "anyOf", "$defs", "title"):
        assert key not in text


def test_exclusive_bounds_use_the_openapi_v3_boolean_form() -> None:
    ratio = structural_schema(Outer)["properties"]["ratio"]
    assert ratio["minimum"] == 0 and ratio["exclusiveMinimum"] is True
    assert ratio["maximum"] == 1 and ratio["exclusiveMaximum"] is True


def test_maps_keep_their_value_schema_or_preserve_unknown_fields() -> None:
    props = structural_schema(Outer)["properties"]
    assert props["labels"] == {"additionalProperties": {"type": "string"}, "type": "object"}
    free = props["free"]
    assert free["x-kubernetes-preserve-unknown-fields"] is True and "additionalProperties" not in free


def test_optional_scalars_become_plain_types_and_forbid_is_not_structural() -> None:
    schema = structural_schema(Outer)
    assert schema["properties"]["name"] == {"type": "string"}
    assert "additionalProperties" not in schema  # extra="forbid" is enforced by pruning, not the schema


def test_unions_that_cannot_be_structural_are_refused() -> None:
    class Ambiguous(BaseModel):
        value: int | str

    with pytest.raises(ValueError, match="anyOf"):
        structural_schema(Ambiguous)


class Bounded(ApiModel):
    share: float = Field(default=0.9, ge=0.5, le=1.0)
    step: float = Field(default=1.0, gt=0.25, lt=2.5)
    whole: float = Field(default=2.0, ge=1, le=10)
    count: int = Field(default=1, ge=1)


def test_fractional_number_bounds_are_also_cel_rules() -> None:
    """The API server checks a JSON integer against a bound truncated to an integer (0.5 -> 0),
    so only a CEL rule keeps ``0`` out of a ``minimum: 0.5`` field."""
    props = structural_schema(Bounded)["properties"]
    assert props["share"]["minimum"] == 0.5
    assert props["share"]["x-kubernetes-validations"] == [
        {"rule": "self >= 0.5", "message": "must be at least 0.5"}
    ]
    assert props["step"]["x-kubernetes-validations"] == [
        {"rule": "self > 0.25", "message": "must be greater than 0.25"},
        {"rule": "self < 2.5", "message": "must be less than 2.5"},
    ]
    for exact in ("whole", "count"):  # whole bounds and integers are compared exactly already
        assert "x-kubernetes-validations" not in props[exact]
