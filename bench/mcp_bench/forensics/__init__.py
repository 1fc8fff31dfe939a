"""Forensics over a finished run: what the levels left behind on the server's side.

:mod:`mcp_bench.forensics.memory` judges GPU memory (and any memory gauge) level by level: the
peak, whether it returned to its baseline after the level, growth across repeated identical
levels, and the PyTorch allocator's fragmentation where the server exposes its snapshot.
"""
