"""``mcp-check gate mcpreadiness/NAME``: wait for the verdict of *this* release, never an older one.

``kubectl wait --for=condition=Ready`` returns at once on the previous release's ``Ready=True``
and waits out its whole timeout on a ``Fail``. The gate command instead waits for an
evaluation that is complete (``status.release.completedAt``), of the MCPReadiness's current spec
(``status.observedGeneration`` is ``metadata.generation``, and so is ``status.release.generation``)
and either of the given release (``--release REV``: ``status.release.revision``) or started
after a point in time (``--since``, by default when the command started: ``status.release.startedAt``).
It watches the object (a watch from the resourceVersion it read, so it hears the verdict as soon
as it is written) and answers as soon as that verdict is there, with the exit codes of
``mcp-check`` (``mcp_checks.exitcodes``):

    0  Pass or Warn
    1  Fail (at once: no timeout is waited out)
    2  a usage error (a bad flag, an unreadable kubeconfig)
    3  Inconclusive or Error (nothing was verified: an unreachable target, a rejected spec,
       a suspended gate), or an API refusal (401, 403, a bad request)
    4  timeout: no such evaluation finished in time (an API server unreachable until then
       included: an outage is waited through, and the message says the server did not answer)

It does not wait for what cannot come. A namespace or a kind that does not exist (a 404 on the
namespace, or on the list of mcpreadinesses: the CRD is not installed) is a usage error (2) at
once. A gate whose current spec has been evaluated and that nothing will evaluate again (no
``spec.watch``, no ``spec.recheckIntervalSeconds``: only a spec change starts another
evaluation) answers at once with the verdict that stands and says what ``--since`` or
``--release`` would have waited for: with ``--since`` (or its default) the code of that
verdict; with ``--release`` of another release, 3, since one release's verdict never stands
for another's.

It prints the verdict table (one row per check) and, with ``--junit FILE``, writes it as JUnit XML.
It talks to the API server with the ``kubernetes`` client only (get, list and watch of
mcpreadinesses), so it runs as a CI step, an Argo CD hook's container command, or a kubectl
plugin (``kubectl mcp gate ...``, installed as ``kubectl-mcp``).
"""

from __future__ import annotations

# Start-up: ``mcp-check --help`` builds the gate's flags from here, so this loads the standard
# library only; the command itself (``.command``) reads status through pydantic models and talks
# to the API server through the ``kubernetes`` client.
from .args import GROUP, PLURAL, VERSION, UsageError, add_arguments, parse_resource, parse_time

__all__ = ["GROUP", "PLURAL", "VERSION", "UsageError", "add_arguments", "parse_resource", "parse_time"]
