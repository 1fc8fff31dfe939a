"""Pure helpers of the local kubelet: ``$(VAR)`` expansion and downward-API field values."""

from __future__ import annotations

import pytest
from kubernetes import client

from mcp_devcluster.podenv import expand_refs, field_value

ENV = {"A": "alpha", "B": "beta", "EMPTY": "", "DOTTED.NAME": "d", "PATH_LIKE": "/x/$(A)"}


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(A)", "alpha"),
        ("pre-$(A)-post", "pre-alpha-post"),
        ("$(A)$(B)", "alphabeta"),
        ("$(MISSING)", "$(MISSING)"),  # unknown names stay as written
        ("$(A) and $(MISSING)", "alpha and $(MISSING)"),
        ("$(EMPTY)x", "x"),
        ("$(DOTTED.NAME)", "d"),
        ("$A", "$A"),  # only the parenthesised form expands
        ("${A}", "${A}"),
        ("$(A", "$(A"),  # unclosed reference stays
        ("", ""),
        ("trailing $", "trailing $"),
        ("$(PATH_LIKE)", "/x/$(A)"),  # a value is not expanded again
    ],
)
def test_expand_refs(text: str, expanded: str) -> None:
    assert expand_refs(text, ENV) == expanded


@pytest.mark.parametrize(
    ("text", "expanded"),
    [("$$(A)", "$(A)"), ("cost: $$5", "cost: $5"), ("$$$(A)", "$alpha"), ("x$$", "x$")],
)
def test_double_dollar_escapes_as_kubernetes_does(text: str, expanded: str) -> None:
    """Kubernetes reduces ``$$`` to ``$``, so ``$$(VAR)`` is the literal ``$(VAR)``."""
    assert expand_refs(text, ENV) == expanded


def _pod() -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(
            name="bench-abc-0-xyz",
            namespace="team",
            uid="1234-5678",
            labels={"app.kubernetes.io/name": "shard", "batch.kubernetes.io/job-completion-index": "3"},
            annotations={"example.com/note": "it's here"},
        ),
        spec=client.V1PodSpec(containers=[], node_name="mcp-local", service_account_name="mcp-bench-shard"),
    )


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("metadata.name", "bench-abc-0-xyz"),
        ("metadata.namespace", "team"),
        ("metadata.uid", "1234-5678"),
        ("spec.nodeName", "mcp-local"),
        ("spec.serviceAccountName", "mcp-bench-shard"),
        ("status.podIP", "127.0.0.1"),
        ("status.hostIP", "127.0.0.1"),
        ("metadata.labels['app.kubernetes.io/name']", "shard"),
        ("metadata.labels['batch.kubernetes.io/job-completion-index']", "3"),
        ("metadata.annotations['example.com/note']", "it's here"),
        ("metadata.labels['absent']", None),
        ("metadata.annotations['app.kubernetes.io/name']", None),  # a label is not an annotation
        ("metadata.generateName", None),
        ("spec.unknown", None),
    ],
)
def test_field_value(path: str, value: str | None) -> None:
    assert field_value(_pod(), path) == value


def test_field_value_without_labels_or_annotations() -> None:
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p", namespace="n"), spec=client.V1PodSpec(containers=[])
    )
    assert field_value(pod, "metadata.labels['x']") is None
    assert field_value(pod, "metadata.annotations['x']") is None
