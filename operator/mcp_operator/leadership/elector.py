"""Taking, keeping and giving back the Lease through the API server.

Every write is a create or a replace with the resourceVersion just read, so two processes that
race for a free or expired lease cannot both win: the API server refuses the second with 409.

The calls are blocking on purpose: the leader renews from a thread of its own (see ``run``), so a
busy event loop, a full thread pool or a backlog of handlers can never delay a renewal.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .. import kube
from .lease import Holder, LeaseConfig, Observation, held_spec, may_take, released_spec

log = logging.getLogger(__name__)
Clock = Callable[[], float]


def standby_problem(exc: Exception, config: LeaseConfig) -> tuple[int, str]:
    """How loud a standby's failed look at the Lease is, and what it says. A 403 does not pass
    on its own: it is the install's RBAC (most often a kustomize overlay that moved the operator
    to another namespace and left the RoleBinding's subject in the old one), so it says which
    rights are missing, where, and what to look at, at error level."""
    if isinstance(exc, ApiException) and exc.status == 403:
        return logging.ERROR, (
            f"standby: forbidden to read or take lease {config.namespace}/{config.name} (403): the "
            f"operator's ServiceAccount needs get, create and update on leases in {config.namespace} "
            "(Role and RoleBinding mcp-operator-leader; an overlay that changes the namespace must "
            "move the bindings' subjects too, see docs/using-it.md); it stays on standby until then"
        )
    return logging.WARNING, f"standby: cannot read or take the lease: {exc}"


class Elector:
    """One process's view of one Lease."""

    def __init__(self, config: LeaseConfig, clock: Clock = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.holder: Holder | None = None  # as last read or written
        self.leading = False
        self.renewed_at = 0.0  # our clock when the last successful write was sent
        self._seen = Observation()
        # a call must end well inside the renew deadline, or one hung request could outlast it
        self._timeout = max(1.0, min(5.0, config.renew_deadline_s / 2))

    def _api(self) -> client.CoordinationV1Api:
        return client.CoordinationV1Api(kube.api_client())

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, _request_timeout=self._timeout, **kwargs)

    def _read(self) -> Holder | None:
        try:
            response = self._call(
                self._api().read_namespaced_lease,
                self.config.name,
                self.config.namespace,
                _preload_content=False,
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return Holder.from_lease(json.loads(response.data))

    def _write(self, holder: Holder | None, spec: dict[str, Any]) -> Holder | None:
        """Create or replace the Lease; None when another process changed it first."""
        meta: dict[str, Any] = {"name": self.config.name, "namespace": self.config.namespace}
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}
        api = self._api()
        try:
            if holder is None:
                response = self._call(
                    api.create_namespaced_lease, self.config.namespace, body, _preload_content=False
                )
            else:
                meta["resourceVersion"] = holder.resource_version
                response = self._call(
                    api.replace_namespaced_lease,
                    self.config.name,
                    self.config.namespace,
                    body,
                    _preload_content=False,
                )
        except ApiException as exc:
            if exc.status == 409:
                return None
            raise
        return Holder.from_lease(json.loads(response.data))

    def try_acquire_or_renew(self) -> bool:
        """One look at the Lease: take or renew it when the rules allow; True while we hold it."""
        now = self.clock()
        holder = self._read()
        seen_since = now if holder is None else self._seen.see(holder, now)
        if not may_take(holder, self.config.identity, seen_since, now):
            self.holder = holder
            return False
        spec = held_spec(holder, self.config.identity, self.config.duration_s, dt.datetime.now(dt.UTC))
        written = self._write(holder, spec)
        if written is None:
            return False
        self.holder = written
        self._seen.see(written, now)
        self.renewed_at = now  # when the call began: a standby cannot have seen the write earlier
        return True

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait on standby until the Lease is ours (True) or ``stop`` is set (False)."""
        announced = ""
        complained = ""
        while not stop.is_set():
            try:
                if await asyncio.to_thread(self.try_acquire_or_renew):
                    self.leading = True
                    log.info(
                        "leading: holds lease %s/%s as %s",
                        self.config.namespace,
                        self.config.name,
                        self.config.identity,
                    )
                    return True
                holder = self.holder.identity if self.holder else ""
                if holder != announced:
                    log.info("standby: lease %s held by %s", self.config.name, holder or "nobody")
                    announced = holder
            except Exception as exc:  # the API server may be away for a while: keep looking
                level, message = standby_problem(exc, self.config)
                if level == logging.WARNING or message != complained:  # a 403 is said once
                    log.log(level, "%s", message)
                complained = message
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.retry_period_s)
        return False

    def hold(self, stop: threading.Event) -> str | None:
        """Renew every retry period while leading, blocking (run it in a thread of its own);
        returns why leadership ended (another holds the Lease, or no renewal succeeded within the
        renew deadline), or None once ``stop`` is set. A standby takes over no sooner than a lease
        duration after the last renewal was sent, so stopping at the renew deadline leaves the
        difference (5 s by default) as the margin against two leaders."""
        while not stop.wait(self.config.retry_period_s):
            # the process stood still (stopped, starved) past the deadline: a standby may lead by
            # now, so stop before anything else runs, without asking the API first
            if (why := self.lapsed()) is not None:
                return why
            try:
                if self.try_acquire_or_renew():
                    continue
                if self.holder is not None and self.holder.identity not in ("", self.config.identity):
                    self.leading = False
                    return f"the lease is held by {self.holder.identity}"
            except Exception as exc:
                log.warning("leader: renewing the lease failed: %s", exc)
            if (why := self.lapsed()) is not None:
                return why
        return None

    def lapsed(self) -> str | None:
        """Why this leader must stop at once: its last successful renewal was sent a renew
        deadline ago or more (the API server refused or did not answer, or the process stood
        still); None while the Lease is fresh."""
        idle = self.clock() - self.renewed_at
        if idle < self.config.renew_deadline_s:
            return None
        self.leading = False
        return f"no renewal for {idle:.0f} s"

    def release(self) -> None:
        """Give the Lease back on a clean exit, if it is still ours, so a standby need not wait
        for it to expire."""
        if not self.leading:
            return
        self.leading = False
        try:
            holder = self._read()
            if holder is None or holder.identity != self.config.identity:
                return
            if self._write(holder, released_spec(holder, dt.datetime.now(dt.UTC))) is not None:
                log.info("released lease %s/%s", self.config.namespace, self.config.name)
        except Exception as exc:  # it expires by itself: a standby waits one lease duration
            log.warning("releasing the lease failed: %s", exc)
