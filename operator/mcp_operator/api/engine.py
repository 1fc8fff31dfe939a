"""The config of an API model that subclasses one of the engine's spec sections.

The engine's section (``mcp_bench.specmodel.SpecModel``) owns the fields, their camelCase aliases
and their one default each; the API model adds only the API server's rules. Its config is the API
models' own: mutable, and errors named by the camelCase path a manifest uses.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue

from .common import ApiModel, with_rules


def engine_rules(*rules: dict[str, JsonValue]) -> ConfigDict:
    """``with_rules`` for a subclass of an engine section (no rules: no validations entry)."""
    config = with_rules(*rules) if rules else ConfigDict(**ApiModel.model_config)
    return ConfigDict(**config, frozen=False, loc_by_alias=True)


def engine_default(model: type[BaseModel], field: str) -> Any:
    """The engine's one default of a field that this API spells or bounds its own way (an API
    model that cannot subclass the engine's: its fields would come first in the CRD)."""
    return model.model_fields[field].default
