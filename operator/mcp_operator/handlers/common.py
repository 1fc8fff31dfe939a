"""What both resources' handlers do the same way: say which object the log lines of a handler
(and of the tasks it starts) are about, post events through one callable the domain code takes,
record a rejected spec once, and wait for a name that does not resolve yet."""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, NoReturn, TypeVar, cast

import kopf

from mcp_common.tolerant import tolerant

from .. import events, kube, leadership, logs, metrics
from ..api.common import Conditioned
from ..conditions import utc_now
from ..readiness.drill.run import Announce
from ..rejection import problems_message
from ..targets import SpecProblem
from ..targets.unresolved import LOOKING_AGAIN, RETRY_S, waiting_conditions
from .leaving import abandon

F = TypeVar("F", bound=Callable[..., Any])
_HANDLED: contextvars.ContextVar[logs.ObjectRef | None] = contextvars.ContextVar(
    "mcp_handled_object", default=None
)


def current_object() -> logs.ObjectRef | None:
    """The object whose handler is running in this context (a task it started inherits it):
    the object source the CLI hands ``logs.setup``."""
    return _HANDLED.get()


def still_leading() -> None:
    """A handler acts only on a fresh Lease: one whose renewal lapsed (the process stood still
    past the renew deadline) exits here, before it writes anything (``lifecycle.abandon``)."""
    if (why := leadership.lapsed()) is not None:
        abandon(why)


def about_object(fn: F) -> F:
    """Run a kopf handler, once :func:`still_leading` holds, with the object of its ``body``
    kwarg (kopf passes one to every resource handler) as :func:`current_object`, async or not.
    ``functools.wraps`` keeps the handler's id (kopf derives it from the wrapped function's
    name)."""
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            still_leading()
            token = _HANDLED.set(logs.ref_from_body(kwargs.get("body")))
            try:
                return await fn(*args, **kwargs)
            finally:
                _HANDLED.reset(token)

        return cast(F, run_async)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        still_leading()
        token = _HANDLED.set(logs.ref_from_body(kwargs.get("body")))
        try:
            return fn(*args, **kwargs)
        finally:
            _HANDLED.reset(token)

    return cast(F, run)


def announcer(body: events.Subject) -> Announce:
    """Events on ``body`` as the domain code posts them: (warning, reason, message)."""

    def announce(warning: bool, reason: str, message: str) -> None:
        (events.warning if warning else events.normal)(body, reason, message)

    return announce


def reject(
    body: kopf.Body, patch: kopf.Patch, kind: str, status: dict[str, Any], problems: list[SpecProblem]
) -> None:
    """Write the rejected status and one warning event; no exception, so kopf does not retry."""
    patch.status.update(status)
    rejected(body, kind, problems)


def rejected(body: events.Subject, kind: str, problems: list[SpecProblem]) -> None:
    """Count a rejected spec and post its one warning event (its status is the caller's)."""
    metrics.RECONCILIATIONS.labels(kind, "invalid").inc()
    events.warning(body, problems[0].reason, problems_message(problems))


async def wait_for_names(
    body: kopf.Body, plural: str, status: Mapping[str, Any], generation: int, problems: list[SpecProblem]
) -> NoReturn:
    """A spec whose names do not resolve yet: say so (an event when that is news) and look again
    after a while (``unresolved``); never a refusal that stands for the generation."""
    message = await say_waiting(body, plural, status, generation, problems)
    raise kopf.TemporaryError(f"{message}{LOOKING_AGAIN}", delay=RETRY_S)


async def say_waiting(
    body: events.Subject, plural: str, status: Mapping[str, Any], generation: int, problems: list[SpecProblem]
) -> str:
    """The waiting conditions written and, when that is news, one event; returns the message.
    The caller looks again after ``unresolved.RETRY_S``."""
    conds, changed = waiting_conditions(tolerant(Conditioned, status), generation, problems, utc_now())
    meta = body["metadata"]
    await kube.patch_status(plural, str(meta["namespace"]), str(meta["name"]), {"conditions": conds})
    message = problems_message(problems)
    if changed:
        events.warning(body, problems[0].reason, message)
    return message
