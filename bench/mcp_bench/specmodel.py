"""The base of the plan sections the operator's API shares (search, consistency, images).

Such a section is the one model of its fields: the operator's CRD models subclass it and add only
what the API server enforces (CEL rules, credential rules), so each default is written here once.
Fields are camelCase on the wire (as the CRDs spell them) and snake_case in a plan file; errors
name the snake_case path, as every other plan error does.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

__all__ = ["SpecModel"]


class SpecModel(BaseModel):
    """A frozen plan section that takes either spelling and forbids unknown fields."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        loc_by_alias=False,
        defer_build=True,
    )
