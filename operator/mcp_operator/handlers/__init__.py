"""kopf handler modules; importing this package registers every handler. The order matters for
the cleanup handlers, which kopf runs in registration order: ``lifecycle`` (stop drills, then
worker processes) before ``readiness`` (the prober's pool and the drills' load processes)."""

from . import benchmark, lifecycle, monitoring, readiness, startup

__all__ = ["benchmark", "lifecycle", "monitoring", "readiness", "startup"]
