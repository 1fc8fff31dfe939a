"""kopf handler modules; importing this package registers every handler. No order among them
matters: the one cleanup handler (``lifecycle``) closes the runtime, whose ``close`` holds the
shutdown's order."""

from . import benchmark, drills, lifecycle, monitoring, periodic, readiness, startup

__all__ = ["benchmark", "drills", "lifecycle", "monitoring", "periodic", "readiness", "startup"]
