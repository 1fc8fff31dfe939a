"""The gate command's flags and the forms they take; standard library only (``--help``)."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable
from typing import Any

from mcp_common import rfc3339

from .. import argtypes

GROUP, VERSION, PLURAL = "mcp2026.io", "v1alpha1", "mcpreadinesses"
RESOURCE_NAMES = frozenset(
    {"mcpreadiness", "mcpreadinesses", "mcpr", f"mcpreadiness.{GROUP}", f"mcpreadinesses.{GROUP}"}
)


class UsageError(Exception):
    pass


def parse_time(text: str) -> dt.datetime:
    """RFC 3339 with a zone (``2026-05-01T12:00:00Z``, ``...+02:00``, fractions allowed)."""
    try:
        return rfc3339.parse(text.strip(), lowercase_z=True)
    except rfc3339.MissingZone:
        raise UsageError(f"{text!r} has no time zone: add Z or an offset") from None
    except ValueError:
        raise UsageError(f"{text!r} is not an RFC 3339 time such as 2026-05-01T12:00:00Z") from None


def parse_resource(text: str) -> str:
    """The gate's name from ``mcpreadiness/NAME`` (or ``mcpr/NAME``, or a bare NAME)."""
    kind, slash, name = text.rpartition("/")
    if slash and kind.lower() not in RESOURCE_NAMES:
        raise UsageError(f"{text!r}: the gate is an MCPReadiness: mcpreadiness/NAME")
    if not name:
        raise UsageError(f"{text!r}: name the gate, e.g. mcpreadiness/release-gate")
    return name


def _argument(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse ``type=``: its ``UsageError`` becomes argparse's, which names
    the flag and exits 2 before anything runs."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The gate's flags; each value is checked as it is parsed (a usage error names the flag)."""
    parser.add_argument(
        "resource", type=_argument(parse_resource), metavar="mcpreadiness/NAME", help="the gate"
    )
    parser.add_argument("-n", "--namespace", help="its namespace (default: the kubeconfig's, or the pod's)")
    parser.add_argument(
        "--timeout",
        type=argtypes.duration(above=0),
        default="10m",
        help="how long to wait: 90s, 10m, 1h30m (default 10m)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--release", help="wait for the evaluation of this release (status.release.revision)")
    which.add_argument(
        "--since",
        type=_argument(parse_time),
        metavar="TIME",
        help="wait for an evaluation started at or after this RFC 3339 time (default: now)",
    )
    parser.add_argument(
        "--junit",
        type=argtypes.output_file,
        metavar="FILE",
        help="write the verdict table as JUnit XML here",
    )
    parser.add_argument(
        "--kubeconfig",
        type=argtypes.existing_file,
        help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    parser.add_argument("--context", help="kubeconfig context")
