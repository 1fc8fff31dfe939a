"""No credentials in any URL field of either resource, refused at apply time by CEL rules that
every URL-like field carries, so a credential never reaches etcd, a child object, status, events
or logs. The operator refuses the same (``CredentialsInUrl``) for objects an older CRD let in.

The regexes are RE2 and Python alike, and carry no backslash or quote: they sit inside a
single-quoted CEL string literal.
"""

from __future__ import annotations

from pydantic import JsonValue

from ..redact import SECRET_NAME
from .common import cel

# userinfo: user[:password]@ before the host, after a scheme or with none; also in an embedded
# URL such as serverMetrics' 'vllm=http://user:pw@host'
USERINFO = "^([^/?#]*://)?[^/?#]*@"
# a query or matrix parameter whose name marks a credential (``mcp_common.redact.SECRET_NAME``,
# the rule ``url_has_credentials`` applies to an object an older CRD let in)
SECRET_PARAM = SECRET_NAME
# a fragment: never sent to a server, so only a token (#access_token=...) has a reason to be there
FRAGMENT = "#"
# a percent-encoded parameter name (?%74oken=): the server decodes it to a name the rule above
# would refuse, so no encoded name is accepted at all
ENCODED_PARAM = "[?&][^=&#]*%[0-9A-Fa-f]{2}[^=&#]*="
CREDENTIALS_HINT = "must not carry credentials (CredentialsInUrl)"
LEAKS_HINT = f"{CREDENTIALS_HINT}: it is copied into status, events and logs"
FRAGMENT_HINT = (
    "must not carry a #fragment (CredentialsInUrl): a fragment is never sent to the server, and "
    "an OAuth token travels in one"
)
ENCODED_HINT = (
    "must not percent-encode a parameter name (CredentialsInUrl): an encoded name such as %74oken "
    "hides a credential from this check"
)

__all__ = [
    "CREDENTIALS_HINT",
    "ENCODED_PARAM",
    "FRAGMENT",
    "LEAKS_HINT",
    "SECRET_PARAM",
    "USERINFO",
    "no_credentials",
    "no_credentials_in_query",
    "rules_extra",
]


def _refuse(pattern: str, message: str) -> dict[str, JsonValue]:
    return cel(f"!self.matches('{pattern}')", message)


def no_credentials_in_query(name: str, hint: str = LEAKS_HINT) -> list[dict[str, JsonValue]]:
    """CEL rules for a path with a query (``/health?token=...``): no secret-looking query or
    matrix parameter, no percent-encoded parameter name and no fragment. ``name`` starts each
    message, so it names the field."""
    return [
        _refuse(SECRET_PARAM, f"{name} query {hint}"),
        _refuse(ENCODED_PARAM, f"{name} query {ENCODED_HINT}"),
        _refuse(FRAGMENT, f"{name} {FRAGMENT_HINT}"),
    ]


def no_credentials(name: str, hint: str = LEAKS_HINT) -> list[dict[str, JsonValue]]:
    """CEL rules for a URL field: no userinfo, and the query rules of ``no_credentials_in_query``."""
    return [_refuse(USERINFO, f"{name} {hint}"), *no_credentials_in_query(name, hint)]


def rules_extra(*rules: list[dict[str, JsonValue]]) -> dict[str, JsonValue]:
    """A field's ``json_schema_extra`` carrying these groups of rules."""
    return {"x-kubernetes-validations": [rule for group in rules for rule in group]}
