"""MCPReadiness: checking the spec, running its checks, the status and verdict built from
them, and the pod readiness gates that mirror the verdict."""
