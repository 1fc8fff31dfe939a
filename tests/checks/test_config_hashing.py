"""The config hash: content only, independent of order, and the only trace a Secret leaves."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from mcp_checks.config import ConfigContent, canonical, config_hash, short
from mcp_checks.config.hashing import normalise


def cm(name: str, **data: str) -> ConfigContent:
    return ConfigContent("ConfigMap", name, data, {})


def test_key_and_object_order_do_not_change_the_hash() -> None:
    a = [cm("app", a="1", b="2"), ConfigContent("Secret", "tok", {"t": "eA=="}, {})]
    b = [ConfigContent("Secret", "tok", {"t": "eA=="}, {}), cm("app", b="2", a="1")]
    assert config_hash(a) == config_hash(b)


def test_any_content_change_changes_the_hash() -> None:
    base = config_hash([cm("app", a="1")])
    assert config_hash([cm("app", a="2")]) != base
    assert config_hash([cm("app", a="1", b="")]) != base
    assert config_hash([cm("other", a="1")]) != base
    assert config_hash([ConfigContent("ConfigMap", "app", {"a": "1"}, {"bin": "AAE="})]) != base
    assert config_hash([ConfigContent("Secret", "app", {"a": "1"}, {})]) != base


def test_hash_is_stable_and_follows_the_documented_canonical_form() -> None:
    objects = [cm("app", b="2", a="1")]
    doc = {"ConfigMap/app": {"data": {"a": "1", "b": "2"}}}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    assert canonical(objects) == text.encode()
    assert config_hash(objects) == hashlib.sha256(text.encode()).hexdigest()
    # pinned (sha256sum of the text above): a change of the form breaks every chart that computes it
    assert config_hash(objects) == "f1bd045a5321f2fe50f10832f088cd757966d3881d6f73539766bfd0adc368c1"


def test_an_object_named_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="named twice"):
        canonical([cm("app"), cm("app")])


def test_annotation_forms_and_prefix() -> None:
    digest = "AB" * 32
    assert normalise(f" sha256:{digest} ") == digest.lower()
    assert short(digest) == "ab" * 6


def test_secret_values_stay_out_of_repr() -> None:
    value = base64.b64encode(b"hunter2-password").decode()
    content = ConfigContent("Secret", "db", {"password": value}, {})
    assert value not in repr(content) and "hunter2" not in repr(content)
    assert "password" in repr(content)
