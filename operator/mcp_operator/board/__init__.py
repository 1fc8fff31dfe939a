"""``kubectl mcp board NAME``: an MCPReadiness's KPI board (or an MCPBenchmark's results) as one
compact screen, instead of ``kubectl get -o yaml`` or a long ``kubectl describe``.

``render`` is pure (the object as the API returns it in, a rich renderable out, and the exit
code CI reads), its status read through the API model (``status``); ``read`` fetches the object
through the kubeconfig as kubectl does; ``command`` is the ``kubectl-mcp`` executable, which
hands every other subcommand (``gate``, the checks) to ``mcp_checks.cli``.
"""
