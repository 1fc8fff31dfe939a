"""The operator's logs: one JSON object per line (``--log-format json``, the Deployment's) or one
readable line (``text``, the default on a terminal), both with the object a line is about.

Every line says which resource it concerns when that is known, from whichever comes first:

1. kopf's per-object logger (the ``logger`` a handler receives): its records carry ``k8s_ref``;
2. the object bound with :func:`bind_object` in the current context (asyncio tasks inherit it);
3. an *object source* installed with :func:`setup`: the operator passes one that reads the
   object whose handler is running (kopf keeps it in a context variable), so a module-level
   logger inside a handler, or a task the handler started, is attributed too.

The id of the evaluation under way is bound with :func:`evaluation` (or :func:`bind_evaluation`)
and appears as ``evaluation``. Credentials never reach the output: the root handler carries
:class:`mcp_operator.redact.RedactingFilter`, and tracebacks are redacted as well.

No kopf import here: the object source is handed in by the CLI.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import json
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from .redact import RedactingFilter, redact_text

FORMATS = ("json", "text")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@dataclass(frozen=True)
class ObjectRef:
    """The resource a log line is about."""

    namespace: str | None
    name: str | None
    kind: str | None = None


ObjectSource = Callable[[], ObjectRef | None]

_OBJECT: contextvars.ContextVar[ObjectRef | None] = contextvars.ContextVar("mcp_log_object", default=None)
_EVALUATION: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_log_evaluation", default=None)


def bind_object(namespace: str | None, name: str | None, kind: str | None = None) -> contextvars.Token[Any]:
    """Attribute every line logged from now on in this context (and tasks started from it)."""
    return _OBJECT.set(ObjectRef(namespace, name, kind))


def bind_evaluation(evaluation_id: str | None) -> contextvars.Token[Any]:
    """Stamp every line logged from now on in this context with an evaluation id."""
    return _EVALUATION.set(evaluation_id)


@contextlib.contextmanager
def evaluation(evaluation_id: str | None) -> Iterator[None]:
    """Lines logged inside the block (and by tasks started inside it) carry ``evaluation``."""
    token = bind_evaluation(evaluation_id)
    try:
        yield
    finally:
        _EVALUATION.reset(token)


@contextlib.contextmanager
def about(namespace: str | None, name: str | None, kind: str | None = None) -> Iterator[None]:
    """Lines logged inside the block are about this object."""
    token = bind_object(namespace, name, kind)
    try:
        yield
    finally:
        _OBJECT.reset(token)


def ref_from_body(body: Mapping[str, Any] | None) -> ObjectRef | None:
    """The reference of a Kubernetes object (a kopf body, a dict)."""
    if not body:
        return None
    meta = body.get("metadata") or {}
    if not meta.get("name"):
        return None
    return ObjectRef(meta.get("namespace"), meta.get("name"), body.get("kind"))


class ContextFilter(logging.Filter):
    """Puts ``k8s_namespace``, ``k8s_name``, ``k8s_kind`` and ``evaluation_id`` on every record,
    at the moment it is logged (in the context of the code that logs it)."""

    def __init__(self, source: ObjectSource | None = None) -> None:
        super().__init__()
        self.source = source

    def _ref(self, record: logging.LogRecord) -> ObjectRef | None:
        k8s_ref = getattr(record, "k8s_ref", None)
        if isinstance(k8s_ref, Mapping) and k8s_ref.get("name"):
            return ObjectRef(k8s_ref.get("namespace"), k8s_ref.get("name"), k8s_ref.get("kind"))
        bound = _OBJECT.get()
        if bound is not None:
            return bound
        if self.source is not None:
            try:
                return self.source()
            except Exception:  # a log line must never fail for want of its context
                return None
        return None

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "k8s_name"):
            ref = self._ref(record)
            record.k8s_namespace = ref.namespace if ref else None
            record.k8s_name = ref.name if ref else None
            record.k8s_kind = ref.kind if ref else None
        if getattr(record, "evaluation_id", None) is None:
            record.evaluation_id = _EVALUATION.get()
        return True


def _iso(created: float) -> str:
    stamp = dt.datetime.fromtimestamp(created, tz=dt.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (RFC 3339, UTC), ``level``, ``logger``, ``message``,
    and where known ``namespace``, ``name``, ``kind``, ``evaluation``, ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact_text(record.getMessage()),
        }
        for key, attr in (
            ("namespace", "k8s_namespace"),
            ("name", "k8s_name"),
            ("kind", "k8s_kind"),
            ("evaluation", "evaluation_id"),
        ):
            value = getattr(record, attr, None)
            if value:
                line[key] = value
        if record.exc_info:
            line["exception"] = redact_text(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = redact_text(record.exc_text)
        if record.stack_info:
            line["stack"] = redact_text(self.formatStack(record.stack_info))
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: [namespace/name] message (evaluation id)`` with redacted tracebacks."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        name = getattr(record, "k8s_name", None)
        namespace = getattr(record, "k8s_namespace", None)
        evaluation_id = getattr(record, "evaluation_id", None)
        prefix = f"[{namespace}/{name}] " if namespace and name else f"[{name}] " if name else ""
        suffix = f" (evaluation {evaluation_id})" if evaluation_id else ""
        if prefix or suffix:
            record = logging.makeLogRecord(record.__dict__)
            record.msg, record.args = f"{prefix}{record.getMessage()}{suffix}", None
        return redact_text(super().format(record))

    def formatException(self, ei: Any) -> str:
        return redact_text(super().formatException(ei))


class EventFormatter(logging.Formatter):
    """What kopf posts as an event from a log line (its ``K8sPoster``): the message and any
    traceback, redacted. Events are read by whoever may list them in the namespace, and kopf
    formats them with its own handler, which the root handler's filter never sees."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


def redact_kopf_events() -> None:
    """Put ``EventFormatter`` on the handler kopf posts its events through (on ``kopf.objects``,
    added when kopf is imported: ``mcp-operator run`` imports it before ``setup``)."""
    for handler in logging.getLogger("kopf.objects").handlers:
        if type(handler).__name__ == "K8sPoster":
            handler.setFormatter(EventFormatter())


class _OperatorHandler(logging.StreamHandler[TextIO]):
    """Our root handler, so a second :func:`setup` replaces it instead of adding another."""


def default_format(stream: TextIO | None = None) -> str:
    """``text`` on a terminal, ``json`` anywhere else (a pod, a file, a pipe)."""
    target = stream if stream is not None else sys.stderr
    try:
        return "text" if target.isatty() else "json"
    except (AttributeError, ValueError):
        return "json"


def make_formatter(fmt: str) -> logging.Formatter:
    if fmt == "json":
        return JsonFormatter()
    if fmt == "text":
        return TextFormatter()
    raise ValueError(f"unknown log format {fmt!r}; expected one of {', '.join(FORMATS)}")


def setup(
    fmt: str | None = None,
    *,
    verbose: bool = False,
    stream: TextIO | None = None,
    source: ObjectSource | None = None,
) -> logging.Handler:
    """Install the one root handler: formatter, credential redaction and object context."""
    handler = _OperatorHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(make_formatter(fmt or default_format(stream)))
    handler.addFilter(RedactingFilter())
    handler.addFilter(ContextFilter(source))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _OperatorHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    redact_kopf_events()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    # a line per liveness probe (every 20 s) only when asked for
    logging.getLogger("aiohttp.access").setLevel(logging.NOTSET if verbose else logging.WARNING)
    logging.captureWarnings(True)  # a library's warning is a log line too, not stray stderr text
    return handler
