"""What every plan section shares: strict frozen models, and errors that name the field path."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class PlanError(ValueError):
    """A plan that cannot run; the message names the field path."""


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem, ``a.b.0: message``, so users find the field at once."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<root>"
        lines.append(f"{loc}: {err['msg']}")
    return "; ".join(lines)
