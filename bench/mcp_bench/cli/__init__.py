"""``mcp-bench``, one module per concern: :mod:`~mcp_bench.cli.parser` wires the subcommands and
turns a bad plan, flag or input into exit code 2; :mod:`~mcp_bench.cli.runflags` turns a run's
flags into a plan; :mod:`~mcp_bench.cli.run` runs it (``run``, ``search``);
:mod:`~mcp_bench.cli.results` reads result documents (``merge``, ``show``, ``plot``, ``report``);
:mod:`~mcp_bench.cli.findings` judges them (``diagnose``, ``forensics``); :mod:`~mcp_bench.cli.common`
holds what they share (usage errors, the exit codes, result files).
"""

from mcp_bench.cli.parser import main

__all__ = ["main"]
