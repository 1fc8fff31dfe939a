"""What the operator's process loads at start: libraries only some gates need wait until one
does (issue 37, item 3: the operator's idle memory). gRPC alone is 8 MB resident, envoy's CSDS
descriptors with protobuf 3.5 MB, the terminal library of ``mcp-bench``'s CLI 2 MB."""

from __future__ import annotations

import json
import subprocess
import sys

# an xdsSync round imports the first three (mcp_checks.xds.csds); the operator never prints a table
LOADED_ON_USE = ("grpc", "envoy", "google.protobuf", "rich")


def test_the_operator_starts_without_the_libraries_a_gate_may_never_need() -> None:
    code = (
        "import json, sys; import mcp_operator.cli, mcp_operator.handlers; "
        f"print(json.dumps([m for m in {list(LOADED_ON_USE)!r} if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout) == []
