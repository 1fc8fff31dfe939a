"""``mcp-check gate mcpreadiness/NAME``: wait for the verdict of *this* release, never an older one.

``kubectl wait --for=condition=Ready`` returns at once on the previous release's ``Ready=True``
and waits out its whole timeout on a ``Fail``. The gate command instead waits for an
evaluation that is complete (``status.release.completedAt``), of the MCPReadiness's current spec
(``status.observedGeneration`` is ``metadata.generation``, and so is ``status.release.generation``)
and either of the given release (``--release REV``: ``status.release.revision``) or started
after a point in time (``--since``, by default when the command started: ``status.release.startedAt``).
It watches the object (a watch from the resourceVersion it read, so it hears the verdict as soon
as it is written) and answers as soon as that verdict is there, with the exit codes of
``mcp-check`` (``mcp_checks.exitcodes``):

    0  Pass or Warn
    1  Fail (at once: no timeout is waited out)
    2  a usage error (a bad flag, an unreadable kubeconfig)
    3  Inconclusive or Error (nothing was verified: an unreachable target, a rejected spec,
       a suspended gate), or an API refusal (401, 403, a bad request)
    4  timeout: no such evaluation finished in time (an API server unreachable until then
       included: an outage is waited through, and the message says the server did not answer)

It does not wait for what cannot come. A namespace or a kind that does not exist (a 404 on the
namespace, or on the list of mcpreadinesses: the CRD is not installed) is a usage error (2) at
once. A gate whose current spec has been evaluated and that nothing will evaluate again (no
``spec.watch``, no ``spec.recheckIntervalSeconds``: only a spec change starts another
evaluation) answers at once with the verdict that stands and says what ``--since`` or
``--release`` would have waited for: with ``--since`` (or its default) the code of that
verdict; with ``--release`` of another release, 3, since one release's verdict never stands
for another's.

It prints the verdict table (one row per check) and, with ``--junit FILE``, writes it as JUnit XML.
It talks to the API server with the ``kubernetes`` client only (get, list and watch of
mcpreadinesses), so it runs as a CI step, an Argo CD hook's container command, or a kubectl
plugin (``kubectl mcp gate ...``, installed as ``kubectl-mcp``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import argtypes
from .exitcodes import ExitCode, for_verdict
from .verdict import CheckOutcome, Finding, Verdict

GROUP, VERSION, PLURAL = "mcp2026.io", "v1alpha1", "mcpreadinesses"
RESOURCE_NAMES = frozenset(
    {"mcpreadiness", "mcpreadinesses", "mcpr", f"mcpreadiness.{GROUP}", f"mcpreadinesses.{GROUP}"}
)
FINAL_PHASES = ("Succeeded", "Failed", "Inconclusive", "Invalid", "Aborted")
WATCH_CHUNK_S = 60  # one watch request at most this long, then read again
RETRY_S = 1.0
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
Obj = Mapping[str, Any]


class UsageError(Exception):
    pass


class GateApiError(Exception):
    """The API server refused in a way waiting cannot fix (401, 403, a bad request)."""


class CannotAppear(Exception):
    """What the gate lives in does not exist (its namespace, or the MCPReadiness kind): no
    verdict can come by waiting, so it is a usage error, not a timeout."""


def parse_time(text: str) -> dt.datetime:
    """RFC 3339 with a zone (``2026-05-01T12:00:00Z``, ``...+02:00``, fractions allowed)."""
    try:
        parsed = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(f"{text!r} is not an RFC 3339 time such as 2026-05-01T12:00:00Z") from None
    if parsed.tzinfo is None:
        raise UsageError(f"{text!r} has no time zone: add Z or an offset")
    return parsed


def parse_resource(text: str) -> str:
    """The gate's name from ``mcpreadiness/NAME`` (or ``mcpr/NAME``, or a bare NAME)."""
    kind, slash, name = text.rpartition("/")
    if slash and kind.lower() not in RESOURCE_NAMES:
        raise UsageError(f"{text!r}: the gate is an MCPReadiness: mcpreadiness/NAME")
    if not name:
        raise UsageError(f"{text!r}: name the gate, e.g. mcpreadiness/release-gate")
    return name


def _argument(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse ``type=``: its ``UsageError`` becomes argparse's, which names
    the flag and exits 2 before anything runs."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


@dataclass(frozen=True)
class Wanted:
    """Which evaluation counts: of ``release``, or started at or after ``since``."""

    release: str | None = None
    since: dt.datetime | None = None

    def describe(self) -> str:
        if self.release is not None:
            return f"release {self.release}"
        assert self.since is not None
        return f"an evaluation started at or after {_stamp(self.since)}"


@dataclass
class Decision:
    code: int
    verdict: str  # Pass, Warn, Fail, Inconclusive, Error, or Timeout
    reason: str
    message: str
    outcomes: list[CheckOutcome] = field(default_factory=list)
    release: dict[str, Any] = field(default_factory=dict)
    note: str = ""  # why this answer came without the evaluation waited for


def _stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ready(status: Obj) -> Obj:
    return next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})


def _verdict(text: Any) -> Verdict:
    try:
        return Verdict(str(text))
    except ValueError:
        return Verdict.ERROR


def row_outcome(row: Obj) -> CheckOutcome:
    """A ``status.checks[]`` row as the check outcome it was written from."""
    findings = [
        Finding(
            str(f.get("subject", "")),
            _verdict(f.get("verdict")),
            str(f.get("reason", "")),
            str(f.get("observed", "")),
            str(f.get("threshold", "")),
            str(f.get("source", "")),
        )
        for f in row.get("findings") or []
    ]
    duration = row.get("durationMs")
    return CheckOutcome(
        name=str(row.get("name", "check")),
        outcome=_verdict(row.get("verdict")),
        reason=str(row.get("reason", "")),
        message=str(row.get("message", "")),
        observed={str(k): str(v) for k, v in (row.get("observed") or {}).items()},
        thresholds={str(k): str(v) for k, v in (row.get("thresholds") or {}).items()},
        measured_at=str(row.get("measuredAt", "")),
        source=str(row.get("source") or ""),
        findings=findings,
        duration_s=None if duration is None else float(duration) / 1000,
    )


def judge(obj: Obj, wanted: Wanted) -> Decision | None:
    """The decision the gate's object allows now, or None: keep waiting."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    generation = meta.get("generation")
    if status.get("observedGeneration") != generation:
        return None  # the operator has not yet taken up the current spec
    ready = _ready(status)
    if spec.get("suspend"):
        message = "spec.suspend is true: the gate evaluates nothing, so no verdict will come"
        row = CheckOutcome("gate", Verdict.ERROR, "Suspended", message)
        return Decision(ExitCode.NOT_VERIFIED, "Error", "Suspended", message, [row])
    release = dict(status.get("release") or {})
    if status.get("phase") not in FINAL_PHASES or not release.get("completedAt"):
        return None  # an evaluation is running, or none has finished since it was claimed
    if release.get("generation") != generation:
        return None
    if wanted.release is not None and release.get("revision") != wanted.release:
        return None
    if wanted.since is not None:
        try:
            started = parse_time(str(release.get("startedAt")))
        except UsageError:
            return None
        if started < wanted.since:
            return None
    verdict = str(status.get("verdict") or "Error")
    reason = str(ready.get("reason") or status.get("phase"))
    message = str(ready.get("message") or "")
    outcomes = [row_outcome(r) for r in status.get("checks") or []]
    if not outcomes:  # a rejected spec: the Ready condition says why
        outcomes = [CheckOutcome("gate", _verdict(verdict), reason, message)]
    return Decision(for_verdict(verdict), verdict, reason, message, outcomes, release)


def _evaluated(generation: Any, release: Obj) -> str:
    parts = [f"generation {generation}"]
    if release.get("revision") is not None:
        parts.append(f"release {release['revision']}")
    if release.get("startedAt"):
        parts.append(f"started {release['startedAt']}")
    return ", ".join(parts)


def settled(obj: Obj, wanted: Wanted) -> Decision | None:
    """The answer when no evaluation ``wanted`` can come (``judge`` found none): the current
    spec's evaluation is over and nothing will start another (no ``spec.watch`` and no
    ``spec.recheckIntervalSeconds``: only a spec change would, and that bumps the generation).
    None: one may still come (a spec not taken up yet, a round running, a watch, a timer, or a
    retry the operator scheduled, ``status.retry.nextAt``, for a verdict of its own capacity)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    generation = meta.get("generation")
    phase = status.get("phase")
    if status.get("observedGeneration") != generation or phase not in FINAL_PHASES:
        return None
    if spec.get("watch") is not None or spec.get("recheckIntervalSeconds") is not None:
        return None
    release = dict(status.get("release") or {})
    done = release.get("generation") == generation and release.get("completedAt")
    if not done and phase != "Invalid":  # a rejected spec may carry no release record
        return None
    if (status.get("retry") or {}).get("nextAt"):
        return None  # the operator evaluates it again (a verdict of its own capacity)
    ready = _ready(status)
    reason = str(ready.get("reason") or phase)
    verdict = str(status.get("verdict") or "Error")
    message = str(ready.get("message") or "")
    evaluated = _evaluated(generation, release)
    final = (
        "nothing will evaluate it again (no spec.watch, no spec.recheckIntervalSeconds): only a "
        "change of its spec starts another evaluation"
    )
    if wanted.release is not None:
        note = (
            f"--release {wanted.release} waits for an evaluation of release {wanted.release}, and none will "
            f"come: the last one ({evaluated}) judged {release.get('revision') or 'no release'} with "
            f"{verdict}, and {final} (spec.release: {wanted.release} would); a verdict of another release "
            f"does not stand for this one"
        )
        row = CheckOutcome("gate", Verdict.INCONCLUSIVE, "ReleaseNotEvaluated", note)
        return Decision(
            ExitCode.NOT_VERIFIED, "Inconclusive", "ReleaseNotEvaluated", note, [row], release, note
        )
    outcomes = [row_outcome(r) for r in status.get("checks") or []]
    if not outcomes:
        outcomes = [CheckOutcome("gate", _verdict(verdict), reason, message)]
    assert wanted.since is not None
    note = (
        f"--since {_stamp(wanted.since)} waits for an evaluation started at or after it, and none will "
        f"come: {final}. The verdict that stands is of its current spec ({evaluated})"
    )
    return Decision(for_verdict(verdict), verdict, reason, message, outcomes, release, note)


def timed_out(obj: Obj | None, wanted: Wanted, waited_s: float, api_error: str | None = None) -> Decision:
    """Exit 4: no answer within ``--timeout``. ``api_error``: the API server's last failure when
    it did not answer at the end (an outage waited through is a timeout, not a Fail)."""
    if obj is None and api_error is not None:
        seen = f"the API server did not answer ({api_error})"
    elif obj is None:
        seen = "the MCPReadiness does not exist"
    else:
        status, meta = obj.get("status") or {}, obj.get("metadata") or {}
        release = status.get("release") or {}
        seen = (
            f"generation {meta.get('generation')}, observed {status.get('observedGeneration')}, phase "
            f"{status.get('phase')}, verdict {status.get('verdict')}, release "
            f"{release.get('revision')} started {release.get('startedAt')} "
            f"completed {release.get('completedAt')}"
        )
    if obj is not None and api_error is not None:
        seen += f"; then the API server stopped answering ({api_error})"
    message = f"no verdict for {wanted.describe()} after {waited_s:.0f}s; last seen: {seen}"
    return Decision(
        ExitCode.TIMEOUT,
        "Timeout",
        "TimedOut",
        message,
        [CheckOutcome("gate", Verdict.ERROR, "TimedOut", message, duration_s=waited_s)],
    )


class GateSource(Protocol):
    """Reads of one MCPReadiness: the object now, and a watch of it from a resourceVersion."""

    def get(self) -> Obj | None: ...

    def missing(self) -> str | None:
        """Why the gate cannot appear (its namespace or kind does not exist); None: it may."""
        ...

    def changes(self, resource_version: str | None, timeout_s: float) -> Iterator[tuple[str, Obj]]: ...


class Transient(Exception):
    """An API error worth retrying until the deadline (5xx, 429, a broken connection, 410 Gone)."""


class ApiSource:
    """The MCPReadiness through the ``kubernetes`` client: get, and a watch (list with a field
    selector on its name, from the resourceVersion last read)."""

    def __init__(self, api_client: Any, namespace: str, name: str) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(api_client)
        self.core = client.CoreV1Api(api_client)
        self.namespace, self.name = namespace, name
        self.version = VERSION

    def _translate(self, exc: Exception) -> Exception:
        from kubernetes.client.exceptions import ApiException

        if isinstance(exc, ApiException):
            if exc.status in (401, 403, 400, 422):
                return GateApiError(f"{exc.status} {exc.reason}: {_api_message(exc)}")
            return Transient(f"{exc.status} {exc.reason}")
        return Transient(f"{type(exc).__name__}: {exc}")

    def get(self) -> Obj | None:
        from kubernetes.client.exceptions import ApiException

        try:
            obj: Obj = self.custom.get_namespaced_custom_object(
                GROUP, self.version, self.namespace, PLURAL, self.name, _request_timeout=30
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise self._translate(exc) from exc
        except Exception as exc:  # urllib3's connection errors and timeouts
            raise self._translate(exc) from exc
        return obj

    def missing(self) -> str | None:
        """A 404 on the list of mcpreadinesses (the API server does not serve the kind: the CRD
        is not installed) or on the namespace (it does not exist; or it is being deleted). Not
        allowed to read the namespace (a Role cannot grant it): cannot tell, so None."""
        from kubernetes.client.exceptions import ApiException

        try:
            self.custom.list_namespaced_custom_object(
                GROUP, self.version, self.namespace, PLURAL, limit=1, _request_timeout=30
            )
        except ApiException as exc:
            if exc.status == 404:
                return (
                    f"the API server does not serve {PLURAL}.{GROUP}/{self.version}: the MCPReadiness "
                    "CRD is not installed in this cluster (kubectl apply -f crds/)"
                )
            raise self._translate(exc) from exc
        except Exception as exc:
            raise self._translate(exc) from exc
        try:
            namespace = self.core.read_namespace(self.namespace, _request_timeout=30)
        except ApiException as exc:
            if exc.status == 404:
                return f"namespace {self.namespace!r} does not exist (-n/--namespace, or the kubeconfig's)"
            if exc.status in (401, 403):
                return None
            raise self._translate(exc) from exc
        except Exception as exc:
            raise self._translate(exc) from exc
        if getattr(namespace.status, "phase", None) == "Terminating":
            return f"namespace {self.namespace!r} is being deleted: nothing can be created in it"
        return None

    def changes(self, resource_version: str | None, timeout_s: float) -> Iterator[tuple[str, Obj]]:
        from kubernetes import watch

        stream = watch.Watch()
        kwargs: dict[str, Any] = {
            "field_selector": f"metadata.name={self.name}",
            "timeout_seconds": max(1, int(timeout_s)),
            "_request_timeout": int(timeout_s) + 15,
            "allow_watch_bookmarks": False,
        }
        if resource_version:
            kwargs["resource_version"] = resource_version
        try:
            for event in stream.stream(
                self.custom.list_namespaced_custom_object,
                GROUP,
                self.version,
                self.namespace,
                PLURAL,
                **kwargs,
            ):
                obj = event.get("object")
                if isinstance(obj, Mapping):
                    yield str(event.get("type")), obj
        except Exception as exc:
            raise self._translate(exc) from exc
        finally:
            stream.stop()


def _api_message(exc: Any) -> str:
    try:
        return str(json.loads(exc.body).get("message") or exc.body)
    except (TypeError, ValueError, AttributeError):
        return str(getattr(exc, "body", "") or exc)


def wait_for_verdict(
    source: GateSource,
    wanted: Wanted,
    timeout_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    note: Callable[[str], None] = lambda _: None,
) -> Decision:
    """Read, then watch from what was read, until ``judge`` decides, ``settled`` finds that no
    such evaluation will come, or the time is up; ``CannotAppear`` when the gate's namespace or
    kind does not exist."""
    started = clock()
    deadline = started + timeout_s
    obj: Obj | None = None
    announced = False
    api_error: str | None = None  # the last failure, while the API server is not answering
    while clock() < deadline:
        try:
            obj = source.get()
            api_error = None
            if obj is None:
                why = source.missing()
                if why is not None:
                    raise CannotAppear(why)
                if not announced:
                    note("the MCPReadiness does not exist (yet); waiting for it")
                    announced = True
                version = None
            else:
                decision = judge(obj, wanted) or settled(obj, wanted)
                if decision is not None:
                    return decision
                version = str((obj.get("metadata") or {}).get("resourceVersion") or "") or None
            for kind, changed in source.changes(version, min(WATCH_CHUNK_S, max(1.0, deadline - clock()))):
                if kind == "DELETED":
                    obj = None
                    continue
                if kind not in ("ADDED", "MODIFIED"):
                    continue
                obj = changed
                decision = judge(obj, wanted) or settled(obj, wanted)
                if decision is not None:
                    return decision
                if clock() >= deadline:
                    break
        except Transient as exc:
            api_error = str(exc)
            note(f"API: {exc}; retrying")
            sleep(min(RETRY_S, max(0.0, deadline - clock())))
    return timed_out(obj, wanted, clock() - started, api_error)


def print_decision(name: str, namespace: str, decision: Decision, took_s: float, out: Any = None) -> None:
    out = out or sys.stdout
    release = decision.release
    print(
        f"mcpreadiness/{name} ({namespace}): {decision.verdict} ({decision.reason}) after {took_s:.1f}s",
        file=out,
    )
    if release:
        parts = [
            f"{label} {release[key]}"
            for key, label in (
                ("revision", "revision"),
                ("workload", "workload"),
                ("workloadTemplateHash", "template"),
                ("applicationRevision", "Application revision"),
                ("trigger", "trigger"),
                ("startedAt", "started"),
                ("completedAt", "completed"),
            )
            if release.get(key) is not None
        ]
        print("release: " + ", ".join(parts), file=out)
    if decision.note:
        print(f"note: {decision.note}", file=out)
    rows = [(o.name, o.outcome.value, o.reason, o.message) for o in decision.outcomes]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(("CHECK", "VERDICT", "REASON"))]
    print(f"{'CHECK':<{widths[0]}}  {'VERDICT':<{widths[1]}}  {'REASON':<{widths[2]}}  MESSAGE", file=out)
    for row in rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}", file=out)
    for o in decision.outcomes:
        if o.observed:
            print(f"  {o.name}: " + ", ".join(f"{k}={v}" for k, v in o.observed.items()), file=out)
        for finding in o.findings[:20]:
            print(
                f"    {finding.outcome.value} {finding.reason} {finding.subject}: {finding.observed}",
                file=out,
            )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The gate's flags; each value is checked as it is parsed (a usage error names the flag)."""
    parser.add_argument(
        "resource", type=_argument(parse_resource), metavar="mcpreadiness/NAME", help="the gate"
    )
    parser.add_argument("-n", "--namespace", help="its namespace (default: the kubeconfig's, or the pod's)")
    parser.add_argument(
        "--timeout",
        type=argtypes.duration(above=0),
        default="10m",
        help="how long to wait: 90s, 10m, 1h30m (default 10m)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--release", help="wait for the evaluation of this release (status.release.revision)")
    which.add_argument(
        "--since",
        type=_argument(parse_time),
        metavar="TIME",
        help="wait for an evaluation started at or after this RFC 3339 time (default: now)",
    )
    parser.add_argument(
        "--junit",
        type=argtypes.output_file,
        metavar="FILE",
        help="write the verdict table as JUnit XML here",
    )
    parser.add_argument(
        "--kubeconfig",
        type=argtypes.existing_file,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    parser.add_argument("--context", help="kubeconfig context")


def _connect(kubeconfig: str | None, context: str | None) -> tuple[Any, str | None]:
    """An ApiClient and the namespace its configuration names (None: not named)."""
    from kubernetes import client, config

    try:
        api = config.new_client_from_config(config_file=kubeconfig, context=context)
    except (config.ConfigException, OSError, TypeError, ValueError) as exc:
        if kubeconfig is not None or context is not None:
            flags = "/".join(f for f, v in (("--kubeconfig", kubeconfig), ("--context", context)) if v)
            raise UsageError(f"argument {flags}: {exc}") from exc
        try:
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as inner:
            raise UsageError(f"no kubeconfig and not in a cluster: {inner}") from inner
        namespace = IN_CLUSTER_NAMESPACE.read_text().strip() if IN_CLUSTER_NAMESPACE.exists() else None
        return client.ApiClient(configuration), namespace
    try:
        _, active = config.list_kube_config_contexts(config_file=kubeconfig)
        if context is not None:
            contexts, _ = config.list_kube_config_contexts(config_file=kubeconfig)
            active = next((c for c in contexts if c.get("name") == context), active)
        namespace = ((active or {}).get("context") or {}).get("namespace")
    except (config.ConfigException, OSError):
        namespace = None
    return api, namespace


def run(args: argparse.Namespace, source: GateSource | None = None, out: Any = None) -> int:
    """The gate command; ``source`` replaces the API server in tests."""
    began = dt.datetime.now(dt.UTC)
    clock_start = time.monotonic()
    out = out or sys.stdout
    name, timeout_s = args.resource, args.timeout  # checked by their argparse types
    wanted = Wanted(args.release, args.since)
    if wanted.release is None and wanted.since is None:
        wanted = Wanted(since=began)
    namespace = args.namespace
    try:
        if source is None:
            kubeconfig = None if args.kubeconfig is None else str(args.kubeconfig)
            api, configured = _connect(kubeconfig, args.context)
            namespace = namespace or configured or "default"
            source = ApiSource(api, namespace, name)
        namespace = namespace or "default"
    except UsageError as exc:  # the kubeconfig or its context: argparse's usage error, exit 2
        usage_error = getattr(args, "usage_error", None)
        if usage_error is not None:
            usage_error(str(exc))
        print(f"mcp-check gate: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    print(
        f"mcpreadiness/{name} ({namespace}): waiting up to {timeout_s:.0f}s for {wanted.describe()}", file=out
    )
    try:
        decision = wait_for_verdict(
            source, wanted, timeout_s, note=lambda text: print(f"  {text}", file=sys.stderr)
        )
    except CannotAppear as exc:  # a usage error: nothing to wait for
        print(f"mcp-check gate: error: mcpreadiness/{name} cannot appear: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE)
    except GateApiError as exc:
        message = f"the API server refused: {exc}"
        decision = Decision(
            ExitCode.NOT_VERIFIED,
            "Error",
            "ApiError",
            message,
            [CheckOutcome("gate", Verdict.ERROR, "ApiError", message)],
        )
    print_decision(name, namespace, decision, time.monotonic() - clock_start, out)
    if args.junit is not None:
        from .junit import junit_xml

        report = junit_xml(decision.outcomes, suite=f"mcpreadiness/{name}", elapsed_s=_evaluation_s(decision))
        args.junit.write_text(report, encoding="utf-8")
    return int(decision.code)


def _evaluation_s(decision: Decision) -> float | None:
    """How long the operator's evaluation took (``startedAt`` to ``completedAt``), for the JUnit
    suite's time; None where the release does not say (the rows' times are summed instead)."""
    try:
        started = parse_time(str(decision.release["startedAt"]))
        completed = parse_time(str(decision.release["completedAt"]))
    except (KeyError, UsageError):
        return None
    return max(0.0, (completed - started).total_seconds())
