"""The README's shell blocks as the user-path tests read them."""

from __future__ import annotations

import pytest

from mcp_devcluster import readme

PAGE = """# title

## Quick start: five minutes

Text.

```sh
echo one   # a comment
curl http://h/x#frag \\
  --flag   # continued
# a whole-line comment
echo 'a # kept'
```

```sh
echo second block
```

## Next

```sh
echo other section
```
"""


def test_the_first_shell_block_of_the_section_is_read() -> None:
    block = readme.shell_block("Quick start", PAGE)
    assert "echo one" in block and "second block" not in block and "other section" not in block


def test_commands_drop_comments_and_join_continuations() -> None:
    assert readme.commands(readme.shell_block("Quick start", PAGE)) == [
        "echo one",
        "curl http://h/x#frag --flag",
        "echo 'a # kept'",
    ]


def test_a_section_without_a_block_is_named() -> None:
    with pytest.raises(readme.ReadmeBlockMissing, match="Nowhere"):
        readme.shell_block("Nowhere", PAGE)


def test_the_readmes_own_user_paths_are_there() -> None:
    """The blocks the e2e tests walk exist in the README as it is."""
    assert readme.commands(readme.shell_block("Set-up"))[:2] == ["make demo", "make test"]
    assert any(c.startswith("kubectl wait") for c in readme.commands(readme.shell_block("Quick start")))
    assert any(c.startswith("make image") for c in readme.commands(readme.shell_block("In your own cluster")))
