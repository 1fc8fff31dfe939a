"""kopf handler modules; importing this package registers every handler."""

from . import benchmark, readiness, startup

__all__ = ["benchmark", "readiness", "startup"]
