"""Hypothesis strategies for canonical STTP ASTs (valid by construction)."""

from __future__ import annotations

from datetime import UTC

from hypothesis import strategies as st

from mneme.sttp import Arr, Bool, Ident, Member, Node, Null, Num, Obj, Str, Value
from mneme.sttp.diagnostics import CONTENT_MAX_DEPTH
from mneme.sttp.model import RESPONSE_FORMATS, TIERS, TRIGGERS
from mneme.sttp.schema import _KNOWN, ALIASES

# Text that exercises escaping: quotes, backslashes, controls, protocol markers, non-ASCII.
# (The utf-8 codec already excludes lone surrogates.)
_ALPHABET = st.characters(codec="utf-8") | st.sampled_from(
    ['"', "\\", "\n", "\t", "\x00", "⟩", "⟨", "⏣", "⊕", "|", "=", ":", ",", "{", "}", "é", "😀"]
)
texts = st.text(_ALPHABET, max_size=24)
numbers = st.integers(-(10**30), 10**30).map(Num) | st.floats(allow_nan=False, allow_infinity=False).map(Num)
confidences = st.floats(0.0, 1.0)
timestamps = st.datetimes(timezones=st.just(UTC)).map(lambda moment: moment.isoformat())
idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
extension_keys = idents.filter(lambda key: key not in _KNOWN and key not in ALIASES)
keys = idents | st.text(_ALPHABET, min_size=1, max_size=8)
booleans = st.booleans().map(Bool)
scalars: st.SearchStrategy[Value] = st.one_of(texts.map(Str), numbers, booleans, st.just(Null()))


def _unique_members(
    values: st.SearchStrategy[Value],
    key_strategy: st.SearchStrategy[str],
    with_confidence: bool,
    max_size: int,
) -> st.SearchStrategy[Obj]:
    entries = st.lists(
        st.tuples(key_strategy, values, confidences if with_confidence else st.none()),
        max_size=max_size,
        unique_by=lambda entry: entry[0],
    )
    return entries.map(lambda items: Obj(tuple(Member(k, v, c) for k, v, c in items)))


def content_value(depth: int) -> st.SearchStrategy[Value]:
    """A content value whose containers stay within S5 (the root object is depth 1)."""
    if depth >= CONTENT_MAX_DEPTH:
        return scalars
    nested = st.deferred(lambda: content_value(depth + 1))
    return st.one_of(
        scalars,
        st.lists(nested, max_size=3).map(lambda items: Arr(tuple(items))),
        _unique_members(nested, keys, True, 3),
    )


extension_values: st.SearchStrategy[Value] = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3).map(lambda items: Arr(tuple(items)))
        | _unique_members(inner, keys, with_confidence=False, max_size=3)
    ),
    max_leaves=8,
)


def _avec(with_psi: bool = True) -> st.SearchStrategy[Obj]:
    names = (
        ("stability", "friction", "logic", "autonomy", "psi")
        if with_psi
        else ("stability", "friction", "logic", "autonomy")
    )
    return st.tuples(*[numbers for _ in names]).map(
        lambda values: Obj(tuple(Member(name, value) for name, value in zip(names, values, strict=True)))
    )


def _with_extensions(known: list[Member]) -> st.SearchStrategy[Obj]:
    extras = st.lists(st.tuples(extension_keys, extension_values), max_size=2, unique_by=lambda e: e[0])
    return extras.map(lambda items: Obj((*known, *(Member(k, v) for k, v in items))))


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    tier = Ident(draw(st.sampled_from(TIERS)))
    prime = Obj(
        (
            Member("attractor_config", draw(_avec(with_psi=False))),
            Member("context_summary", Str(draw(texts))),
            Member("relevant_tier", Ident(draw(st.sampled_from(TIERS)))),
            Member("retrieval_budget", Num(draw(st.integers(0, 10**6)))),
        )
    )
    provenance = draw(
        _with_extensions(
            [
                Member("trigger", Ident(draw(st.sampled_from(TRIGGERS)))),
                Member("response_format", Ident(draw(st.sampled_from(RESPONSE_FORMATS)))),
                Member("origin_session", Str(draw(texts))),
                Member("compression_depth", Num(draw(st.integers(0, 100)))),
                Member("parent_node", draw(st.just(Null()) | texts.map(Str))),
                Member("prime", prime),
            ]
        )
    )
    envelope_known = [
        Member("timestamp", Str(draw(timestamps))),
        Member("tier", tier),
        Member("session_id", Str(draw(texts))),
    ]
    if draw(st.booleans()):
        envelope_known.append(Member("schema_version", Str(draw(texts))))
    envelope_known += [Member("user_avec", draw(_avec())), Member("model_avec", draw(_avec()))]
    content = draw(_unique_members(content_value(1), keys, True, 4).filter(lambda obj: bool(obj.members)))
    compression = draw(_avec())
    metrics = draw(
        _with_extensions(
            [
                Member("rho", draw(numbers)),
                Member("kappa", draw(numbers)),
                Member("psi", compression.get("psi") or Num(0)),  # a valid node's psi agrees with it (§12)
                Member("compression_avec", compression),
            ]
        )
    )
    return Node(
        provenance=provenance,
        envelope=draw(_with_extensions(envelope_known)),
        content=content,
        metrics=metrics,
        ordinal=draw(st.integers(0, 10**6)),
    )
