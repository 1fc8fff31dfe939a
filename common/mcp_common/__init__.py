"""What ``mcp_bench``, ``mcp_checks`` and the operator share and none of them may own: the rule
that keeps credentials out of what they show. It imports nothing of theirs."""
