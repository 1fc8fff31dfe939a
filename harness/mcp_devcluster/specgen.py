"""Hypothesis strategies for values a CRD's schema admits, cross-field rules included.

Built from the structural schema the API server enforces (type, enum, bounds, lengths, items,
maps, required, patterns; Go's RE2 patterns are Python-compatible here) and from the CEL rules
(``x-kubernetes-validations``) the project's CRD generator writes, which come in a few shapes:
exactly one of two fields, at most one, at least one (non-empty), a field a ``kind`` needs or
forbids, an order between two fields, a scalar bound, a string that must not match, map keys
that must. Each shape is honoured while drawing. A rule of any other shape is left to the API
server and listed in :data:`UNHANDLED_RULES`, so a test can count the specs the server still
refuses and know why.

(hypothesis-jsonschema would do the structural part, but its object strategy calls a Hypothesis
internal that current Hypothesis no longer has, and it knows neither OpenAPI's boolean
``exclusiveMinimum`` nor the CEL rules.)

``rewrite`` lets the caller replace what must stay bounded or be watched (addresses the run
dials, Secret references), given each value's schema and path after drawing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

Path_ = tuple[str | int, ...]
Rewrite = Callable[[st.DrawFn, Path_, dict[str, Any], Any], Any]

OPTIONAL_ONE_IN = 3  # an optional field is drawn one time in three: specs stay readable
MAX_ITEMS = 3  # beyond the schema's minimum: lists and maps stay small
TEXT_MAX = 24
INT_SPAN, FLOAT_SPAN = 2**31, 1e9  # where the schema gives no bound
ASCII = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
TEXT = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc"))

_NAME = r"(\w+)"
EXACTLY_ONE = re.compile(rf"^has\(self\.{_NAME}\) != has\(self\.{_NAME}\)$")
AT_MOST_ONE = re.compile(rf"^!has\(self\.{_NAME}\) \|\| !has\(self\.{_NAME}\)$")
AT_LEAST_ONE = re.compile(r"^[()\s|&>0]*(?:(?:has|size)\(self\.\w+\)[()\s|&>0]*)+$")
HAS = re.compile(rf"has\(self\.{_NAME}\)")
KIND_NEEDS = re.compile(r"^self\.kind != '(\w+)' \|\| \(?((?:!?has\(self\.\w+\)(?: && )?)+)\)?$")
EXCLUDES = re.compile(rf"^!has\(self\.{_NAME}\) \|\| !\(((?:has\(self\.\w+\)(?: \|\| )?)+)\)$")
KIND_IN_NEEDS = re.compile(rf"^!\(self\.kind in \[([^\]]*)\]\) \|\| has\(self\.{_NAME}\)$")
NEEDS = re.compile(rf"(!?)has\(self\.{_NAME}\)")
ORDER = re.compile(rf"^(?:!has\(self\.\w+\) \|\| )*self\.{_NAME} (<=|<) (?:double\()?self\.{_NAME}\)?$")
BOUND = re.compile(r"^self (>=|<=) ([0-9.eE+-]+)$")
NOT_MATCHES = re.compile(r"^!self\.matches\('(.*)'\)$")
KEYS_MATCH = re.compile(r"^self\.all\(k, k\.size\(\) <= (\d+) && k\.matches\('(.*)'\)\)$")
EDGES = "!has(self.edges) || !has(self.weights) || size(self.edges) == size(self.weights) + 1"
MEMORY = (
    "!has(self.memoryLimit) || !has(self.memory) || "
    "!quantity(self.memoryLimit).isLessThan(quantity(self.memory))"
)
EXISTS_NO_VALUE = "!has(self.value) || self.value == '' || !has(self.operator) || self.operator != 'Exists'"
SECONDS_NO_EXECUTE = "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')"
UNIQUE_QUERIES = "self.queries.all(q, self.queries.exists_one(r, r.name == q.name))"
CLASS_MODEL = re.compile(
    r"(?:^!has\(self\.classes\) \|\| self\.classes|^self)"
    r"\.all\(c, c\.backend == 'http' \|\| has\(c\.model\)\)$"
)
URL_ENCODING = "(has(self.encoding) && self.encoding == 'url') == has(self.urlBase)"
NO_SHARD_RETRY = (
    "!has(self.shards) || !has(self.stages) || self.stages.all(s, !has(s.load) || !has(s.load.retry))"
)

BACKEND_RULES = (
    "!(has(self.workload) && (has(self.workload.images)",
    "!(has(self.workload) && (has(self.workload.imageTensor)",
    "!has(self.consistency) || self.target.backend != 'http'",
)
SEARCH_RULES = ("!has(self.search) || (has(self.rate) ? ",)

UNHANDLED_RULES: set[str] = set()


END = re.compile(r"\$(?=$|\||\))")


def go_pattern(pattern: str) -> str:
    """A schema pattern for Python's ``re`` as RE2 reads it: ``$`` is the end of the text (in
    Python it also matches before a final newline, which the API server then refuses)."""
    return END.sub(r"\\Z", pattern)


def cel_regex(literal: str) -> re.Pattern[str]:
    """A CEL string literal's regular expression (its quotes doubled in YAML are single here)."""
    return re.compile(go_pattern(literal.replace("\\\\", "\\")))


def value(schema: dict[str, Any], rewrite: Rewrite | None = None, path: Path_ = ()) -> st.SearchStrategy[Any]:
    """Values ``schema`` admits, with its CEL rules, rewritten by ``rewrite`` where it says so."""
    drawn = _value(schema, rewrite, path)
    if rewrite is None:
        return drawn
    return _rewritten(drawn, rewrite, path, schema)


def _rewritten(
    drawn: st.SearchStrategy[Any], rewrite: Rewrite, path: Path_, schema: dict[str, Any]
) -> st.SearchStrategy[Any]:
    @st.composite
    def run(draw: st.DrawFn) -> Any:
        return rewrite(draw, path, schema, draw(drawn))

    return run()


def _value(schema: dict[str, Any], rewrite: Rewrite | None, path: Path_) -> st.SearchStrategy[Any]:
    rules = [r["rule"] for r in schema.get("x-kubernetes-validations") or []]
    type_ = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if type_ == "object" or "properties" in schema:
        if "properties" in schema:
            return _object(schema, rules, rewrite, path)
        if isinstance(schema.get("additionalProperties"), dict):
            return _map(schema, rules, rewrite, path)
        return st.dictionaries(
            st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.text(ASCII, max_size=8), max_size=2
        )
    if type_ == "array":
        items = value(schema.get("items") or {}, rewrite, (*path, 0))
        low = int(schema.get("minItems", 0))
        high = min(int(schema.get("maxItems", low + MAX_ITEMS)), low + MAX_ITEMS)
        return _array_rules(st.lists(items, min_size=low, max_size=high), rules)
    if type_ == "string":
        return _string(schema, rules)
    if type_ in ("integer", "number"):
        return _number(schema, rules)
    if type_ == "boolean":
        return st.booleans()
    return st.one_of(st.integers(-5, 5), st.text(ASCII, max_size=8), st.booleans())


def _string(schema: dict[str, Any], rules: list[str]) -> st.SearchStrategy[str]:
    low, high = int(schema.get("minLength", 0)), int(schema.get("maxLength", 10**6))
    if "pattern" in schema:
        drawn = st.from_regex(go_pattern(schema["pattern"]), alphabet=ASCII).filter(
            lambda s: low <= len(s) <= high
        )
    else:
        drawn = st.text(TEXT, min_size=low, max_size=max(low, min(high, TEXT_MAX)))
    for rule in rules:
        found = NOT_MATCHES.match(rule)
        if found:
            drawn = drawn.filter(_not_matching(cel_regex(found.group(1))))
        else:
            UNHANDLED_RULES.add(rule)
    return drawn


def _not_matching(refused: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda text: refused.search(text) is None


def _at_most(size: int) -> Callable[[str], bool]:
    return lambda text: len(text) <= size


def _number(schema: dict[str, Any], rules: list[str]) -> st.SearchStrategy[Any]:
    low, high = schema.get("minimum"), schema.get("maximum")
    exclude_low, exclude_high = bool(schema.get("exclusiveMinimum")), bool(schema.get("exclusiveMaximum"))
    for rule in rules:
        found = BOUND.match(rule)
        if found is None:
            UNHANDLED_RULES.add(rule)
            continue
        bound = float(found.group(2))
        if found.group(1) == ">=" and (low is None or bound >= low):
            low, exclude_low = bound, False
        elif found.group(1) == "<=" and (high is None or bound <= high):
            high, exclude_high = bound, False
    if schema.get("type") == "integer":
        first = -INT_SPAN if low is None else int(low) + (1 if exclude_low and low == int(low) else 0)
        if low is not None and low != int(low):
            first = int(low) + 1
        last = INT_SPAN if high is None else int(high) - (1 if exclude_high and high == int(high) else 0)
        return st.integers(first, last)
    floor = -FLOAT_SPAN if low is None else float(low)
    ceiling = (floor + FLOAT_SPAN) if high is None else float(high)
    return st.floats(
        floor,
        ceiling,
        exclude_min=exclude_low,
        exclude_max=exclude_high,
        allow_nan=False,
        allow_infinity=False,
    )


def _map(
    schema: dict[str, Any], rules: list[str], rewrite: Rewrite | None, path: Path_
) -> st.SearchStrategy[dict[str, Any]]:
    keys: st.SearchStrategy[str] = st.from_regex(r"[a-z]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
    for rule in rules:
        found = KEYS_MATCH.match(rule)
        if found is None:
            UNHANDLED_RULES.add(rule)
            continue
        keys = st.from_regex(cel_regex(found.group(2)), alphabet=ASCII).filter(_at_most(int(found.group(1))))
    low = int(schema.get("minProperties", 0))
    high = min(int(schema.get("maxProperties", low + MAX_ITEMS)), low + MAX_ITEMS)
    return st.dictionaries(
        keys, value(schema["additionalProperties"], rewrite, (*path, "*")), min_size=low, max_size=high
    )


def _array_rules(drawn: st.SearchStrategy[list[Any]], rules: list[str]) -> st.SearchStrategy[list[Any]]:
    for rule in rules:
        if CLASS_MODEL.match(rule):
            drawn = drawn.map(_with_models)
        else:
            UNHANDLED_RULES.add(rule)
    return drawn


def _with_models(classes: list[Any]) -> list[Any]:
    for item in classes:
        if isinstance(item, dict) and item.get("backend") != "http":
            item.setdefault("model", "m")
    return classes


def _object(
    schema: dict[str, Any], rules: list[str], rewrite: Rewrite | None, path: Path_
) -> st.SearchStrategy[dict[str, Any]]:
    properties: dict[str, dict[str, Any]] = schema["properties"]
    required = set(schema.get("required") or [])

    def child(name: str) -> st.SearchStrategy[Any]:
        return value(properties[name], rewrite, (*path, name))

    def nonempty(draw: st.DrawFn, name: str) -> Any:
        drawn = draw(child(name))
        while isinstance(drawn, list | dict) and not drawn:
            drawn = draw(child(name))
        return drawn

    @st.composite
    def draw_object(draw: st.DrawFn) -> dict[str, Any]:
        left_out: set[str] = set()
        put_in: set[str] = set()
        for rule in rules:
            found = EXACTLY_ONE.match(rule)
            if found:
                pick = draw(st.sampled_from(found.groups()))
                put_in.add(pick)
                left_out.update(n for n in found.groups() if n != pick)
        out: dict[str, Any] = {}
        for name in properties:
            if name in left_out:
                continue
            if name in required or name in put_in or draw(st.integers(1, OPTIONAL_ONE_IN)) == 1:
                out[name] = draw(child(name))
        for rule in rules:
            _apply(rule, out, properties, draw, nonempty)
        return out

    return draw_object()


def _apply(
    rule: str,
    out: dict[str, Any],
    properties: dict[str, dict[str, Any]],
    draw: st.DrawFn,
    nonempty: Callable[[st.DrawFn, str], Any],
) -> None:
    """Make ``out`` keep one object-level ``rule``; a rule of a shape not known is counted."""
    if EXACTLY_ONE.match(rule):
        return  # kept while drawing
    if found := AT_MOST_ONE.match(rule):
        if all(n in out for n in found.groups()):
            out.pop(draw(st.sampled_from(found.groups())))
        return
    if (found := ORDER.match(rule)) is not None:
        first, op, second = found.groups()
        _order(out, properties, first, op, second)
        return
    if (found := KIND_NEEDS.match(rule)) is not None:
        if out.get("kind") == found.group(1):
            for negated, name in NEEDS.findall(found.group(2)):
                if negated:
                    out.pop(name, None)
                elif name not in out:
                    out[name] = nonempty(draw, name)
        return
    if (found := KIND_IN_NEEDS.match(rule)) is not None:
        kinds = [k.strip().strip("'") for k in found.group(1).split(",")]
        if out.get("kind") in kinds and found.group(2) not in out:
            out[found.group(2)] = nonempty(draw, found.group(2))
        return
    if AT_LEAST_ONE.match(rule) and "!" not in rule:
        names = HAS.findall(rule)
        if not any(out.get(n) not in (None, [], {}) for n in names):
            name = draw(st.sampled_from(names))
            out[name] = nonempty(draw, name)
        return
    if (found := EXCLUDES.match(rule)) is not None:
        if found.group(1) in out:
            for name in HAS.findall(found.group(2)):
                out.pop(name, None)
        return
    if rule == URL_ENCODING:
        if "urlBase" in out:
            out["encoding"] = "url"
        elif out.get("encoding") == "url":
            out.pop("encoding")
        return
    if rule.startswith(BACKEND_RULES):
        _backend_rules(out)
        return
    if rule.startswith(SEARCH_RULES):
        _search(out)
        return
    if rule == EDGES:
        if "edges" in out and "weights" in out:
            edges, weights = out["edges"], out["weights"]
            while len(edges) < 2:
                edges.append((edges[-1] if edges else 0) + 1)
            out["weights"] = (weights * len(edges))[: len(edges) - 1] or [1] * (len(edges) - 1)
        return
    if rule == MEMORY:
        if "memory" in out:
            out.pop("memoryLimit", None)
        return
    if rule == EXISTS_NO_VALUE:
        if out.get("operator") == "Exists":
            out.pop("value", None)
        return
    if rule == SECONDS_NO_EXECUTE:
        if "tolerationSeconds" in out:
            out["effect"] = "NoExecute"
        return
    if rule == UNIQUE_QUERIES:
        for i, query in enumerate(out.get("queries") or []):
            query["name"] = f"{query['name'][:120]}_{i}"
        return
    if CLASS_MODEL.match(rule):
        _with_models(out.get("classes") or [])
        return
    if rule == NO_SHARD_RETRY:
        if "shards" in out:
            for stage in out.get("stages") or []:
                (stage.get("load") or {}).pop("retry", None)
        return
    UNHANDLED_RULES.add(rule)


def _backend_rules(spec: dict[str, Any]) -> None:
    """An MCPBenchmark's rules across ``target.backend``: images for openai-chat only, an image
    tensor for Triton only, consistency probes not on plain HTTP; what the backend cannot take
    is left out."""
    backend = (spec.get("target") or {}).get("backend", "http")
    workload = spec.get("workload") or {}
    parts = [workload, *(workload.get("classes") or [])]
    for field, backends in (("images", ("openai-chat",)), ("imageTensor", ("triton-http", "triton-grpc"))):
        if backend not in backends:
            for part in parts:
                part.pop(field, None)
    if backend == "http":
        spec.pop("consistency", None)


def _search(load: dict[str, Any]) -> None:
    """``load.search`` starts from one level inside its bounds: the drawn first level, moved into
    them (an integer concurrency where one fits, else no search)."""
    search = load.get("search")
    if search is None:
        return
    floor, ceiling = search["floor"], search["ceiling"]
    if "rate" in load:
        load["rate"] = [min(max(load["rate"][0], floor), ceiling)]
        return
    level = min(max(int(load["concurrency"][0]), math.ceil(floor)), math.floor(ceiling))
    if floor <= level <= ceiling:
        load["concurrency"] = [level]
    else:
        load.pop("search")


def _order(
    out: dict[str, Any], properties: dict[str, dict[str, Any]], first: str, op: str, second: str
) -> None:
    """``first op second`` (with the second's default when it is left out): swapped when both are
    set, else the first (optional in every such rule) left out."""
    low, high = out.get(first), out.get(second, properties.get(second, {}).get("default"))
    if low is None or high is None or (low <= high if op == "<=" else low < high):
        return
    if second in out and (op == "<=" or low != high):
        out[first], out[second] = high, low
        return
    out.pop(first)
