"""The documentation's shape: a short README that keeps the two set-up commands, and a site
(``mkdocs.yml``) whose nav lists every page under ``docs/``. The links themselves are checked by
``make docs`` (``mkdocs build --strict``, part of ``make lint``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250


class _TolerantLoader(yaml.SafeLoader):
    """SafeLoader that reads tags it does not know (mkdocs-material's ``!!python/name:``, ``!ENV``)
    as plain values instead of failing: only the nav matters here."""


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    assert isinstance(node, yaml.MappingNode)
    return loader.construct_mapping(node)


_TolerantLoader.add_multi_constructor("!", _any_tag)
_TolerantLoader.add_multi_constructor("tag:yaml.org,2002:python/", _any_tag)


def _nav_pages(entry: Any) -> set[str]:
    """Every page path in a mkdocs nav (a list of pages, ``{title: page}`` and ``{title: [..]}``)."""
    if isinstance(entry, str):
        return set() if entry.startswith(("http://", "https://")) else {entry}
    items = entry if isinstance(entry, list) else list(entry.values()) if isinstance(entry, dict) else []
    pages: set[str] = set()
    for item in items:
        pages |= _nav_pages(item)
    return pages


def _mkdocs_config() -> dict[str, Any]:
    config = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=_TolerantLoader)
    assert isinstance(config, dict)
    return config


def test_the_readme_is_short_and_keeps_the_two_set_up_commands() -> None:
    readme = (REPO / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move sections to docs/"
    assert "make demo" in readme
    assert "make test" in readme


def test_every_docs_page_is_in_the_site_nav() -> None:
    config = _mkdocs_config()
    docs_dir = REPO / config.get("docs_dir", "docs")
    pages = {path.relative_to(docs_dir).as_posix() for path in docs_dir.rglob("*.md")}
    nav = _nav_pages(config["nav"])
    assert pages - nav == set(), f"pages missing from mkdocs.yml's nav: {sorted(pages - nav)}"
    assert nav - pages == set(), f"nav entries with no page: {sorted(nav - pages)}"


def test_the_site_is_built_strictly() -> None:
    assert _mkdocs_config().get("strict") is True
