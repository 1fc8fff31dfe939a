"""The defaults and bounds that more than one of mcp_checks' modules share, written once.

Standard library only: the CLI's help names them before it knows which command runs, and the
typed specs (``mcp_checks.specs``), the checks' runtime specs and the operator's API read them
through those specs.
"""

from __future__ import annotations

ARGO_CD_NAMESPACE = "argocd"  # where Argo CD's own install keeps its Applications
DEFAULT_ANNOTATION = "checksum/config"  # the Helm convention
CONFIG_TIMEOUT_S = 30.0  # configConsistency: all API reads
DEFAULT_THRESHOLD = 0.003  # metricDrift: 0.3%, the MCP 2026 reference figure
DRIFT_TIMEOUT_S = 10.0  # metricDrift: per Prometheus call
XDS_TYPES = ("LDS", "RDS", "CDS", "EDS")  # xdsSync: every type must be synced
XDS_GRACE_S = 30.0  # xdsSync: stale for less than this has not converged yet
XDS_TIMEOUT_S = 5.0  # xdsSync: per source call
MAX_XDS_SOURCES = 16  # xdsSync.sources: what a manifest's field takes, a flag takes
# metricDrift's --reference-file, in the entry the CLI hands the suite: a rules file where the
# check runs, never a field of the API
REFERENCE_FILE = "referenceFile"
