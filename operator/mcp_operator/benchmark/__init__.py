"""MCPBenchmark: the run plan, the shard Job and its contract with the shard pods, the shard
entrypoint, collecting and verifying shard results, and the status built from them."""
