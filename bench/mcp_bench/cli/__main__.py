"""``python -m mcp_bench.cli``: the ``mcp-bench`` command without its entry point."""

import sys

from mcp_bench.cli.parser import main

sys.exit(main())
