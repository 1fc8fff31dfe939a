"""A status read through its API model, tolerant of what it lacks: an object the API returns may
have been written by an older or newer operator, whose status the model would refuse whole.

What the model cannot read is left out, the least that makes it readable: a value of the wrong
type or a field the model does not know (its default shows instead), a row that lacks a field
with no empty form (a number, a verdict), and a missing text is empty. Which fields the status
held stays on the model (``model_fields_set``, ``held``): a figure it does not hold is missing,
not its default.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Mapping
from typing import Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
Loc = tuple[int | str, ...]
MAX_REPAIRS = 10_000  # each repair removes or fills one value: a status has fewer
_EMPTY: dict[Any, Any] = {str: "", list: [], dict: {}}


def held(row: BaseModel, field: str) -> Any:
    """A field's value where the status holds it, else None (not the model's default)."""
    return getattr(row, field) if field in row.model_fields_set else None


def status_in(obj: Mapping[str, Any], model: type[M]) -> M:
    """The status of an object as the API server returns it, through ``model`` (``tolerant``);
    empty where the object has none yet."""
    status = obj.get("status")
    return tolerant(model, status if isinstance(status, Mapping) else {})


def tolerant(model: type[M], data: Mapping[str, Any]) -> M:
    """``data`` through ``model``, each value the model refuses repaired (as the module says);
    the ``ValidationError`` where what is left cannot be read (a field of ``model`` itself that it
    needs and has no empty form). A status the model reads as it is (the common case) is read
    without a copy: validation never changes its input, and the copy cost more than the reading
    (every kopf filter of every object's every event reads one)."""
    try:
        return model.model_validate(data)
    except ValidationError:
        pass
    fixed: dict[str, Any] = copy.deepcopy(dict(data))
    for _ in range(MAX_REPAIRS):
        try:
            return model.model_validate(fixed)
        except ValidationError as exc:
            error = exc.errors()[0]
            if not _repair(fixed, model, tuple(error["loc"]), error["type"] == "missing"):
                raise
    return model.model_validate(fixed)


def _repair(data: dict[str, Any], model: type[BaseModel], loc: Loc, missing: bool) -> bool:
    """Fill or take out the value at ``loc``; False where there is nothing to take out."""
    if missing:
        empty = _empty_of(_annotation(model, loc))
        parent = _walk(data, loc[:-1])
        if empty is not _NO_EMPTY and len(parent) == len(loc) and isinstance(parent[-1], dict):
            parent[-1][loc[-1]] = copy.copy(empty)
            return True
        loc = loc[:-1]  # the row without it goes
    path = _walk(data, loc)
    if len(path) < 2:
        return False
    del path[-2][loc[len(path) - 2]]  # the deepest value there is on the way
    return True


def _walk(data: Any, loc: Loc) -> list[Any]:
    """The values along ``loc`` as far as the data goes (the data itself first)."""
    path = [data]
    for part in loc:
        here = path[-1]
        if isinstance(here, dict) and part in here:
            path.append(here[part])
            continue
        if not (isinstance(here, list) and isinstance(part, int) and 0 <= part < len(here)):
            break
        path.append(here[part])
    return path


class _NoEmpty:
    pass


_NO_EMPTY = _NoEmpty()


def _empty_of(annotation: Any) -> Any:
    """The empty form of a type, where it has one (text, a list, a map, or none)."""
    if _optional(annotation):
        return None
    return _EMPTY.get(get_origin(annotation) or annotation, _NO_EMPTY)


def _optional(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


def _annotation(model: type[BaseModel], loc: Loc) -> Any:
    """The declared type at ``loc`` (the wire's names), None where it leaves the models."""
    current: Any = model
    for part in loc:
        if _optional(current):
            current = next(a for a in get_args(current) if a is not type(None))
        origin, args = get_origin(current), get_args(current)
        if isinstance(part, int) and origin is list and args:
            current = args[0]
        elif isinstance(current, type) and issubclass(current, BaseModel):
            fields = current.model_fields
            current = next((f.annotation for n, f in fields.items() if part in (n, f.alias)), None)
        elif origin is dict and len(args) == 2:
            current = args[1]
        else:
            return None
    return current
