"""The termination message between a container and this kubelet.

Containers here share the machine's filesystem, so a pod's ``terminationMessagePath`` cannot
be honoured: each container gets a file of its own, named in ``MCP_TERMINATION_MESSAGE_PATH``.
``FallbackToLogsOnError`` takes the tail of the log when a failed container wrote nothing.
"""

from __future__ import annotations

from pathlib import Path

MESSAGE_PATH_ENV = "MCP_TERMINATION_MESSAGE_PATH"
MESSAGE_LIMIT = 4096
FALLBACK_LINES = 80
FALLBACK_LIMIT = 2048


def message_file(pod_dir: Path, container: str) -> Path:
    """The container's message file, created empty: reading it never fails when the container
    wrote nothing, and nothing left by an earlier start is read back."""
    path = pod_dir / f"{container}.termination-log"
    path.write_text("")
    return path


def termination_message(message_path: Path, log_path: Path, policy: str, exit_code: int) -> str:
    """The message the container wrote, or under ``FallbackToLogsOnError`` its log tail after a failure."""
    message = message_path.read_text(errors="replace")[:MESSAGE_LIMIT]
    if not message and exit_code != 0 and policy == "FallbackToLogsOnError":
        lines = log_path.read_text(errors="replace").splitlines()[-FALLBACK_LINES:]
        message = "\n".join(lines)[-FALLBACK_LIMIT:]
    return message
