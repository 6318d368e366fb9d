import pytest
from hypothesis import given
from hypothesis import strategies as st

from mneme import paths
from mneme.errors import InvalidInput

segments = st.from_regex(r"[a-z0-9][a-z0-9-]{0,62}", fullmatch=True)


@given(st.lists(segments, max_size=paths.MAX_DEPTH))
def test_valid_paths_round_trip(parts: list[str]) -> None:
    assert paths.parse_path(paths.join(parts)) == tuple(parts)


@given(st.lists(segments, min_size=paths.MAX_DEPTH + 1, max_size=paths.MAX_DEPTH + 3))
def test_too_deep_paths_name_the_depth(parts: list[str]) -> None:
    with pytest.raises(InvalidInput, match=f"depth {len(parts)} exceeds the maximum of 8"):
        paths.parse_path(paths.join(parts))


@given(st.text(min_size=1, max_size=70).filter(lambda s: not paths.SEGMENT_RE.fullmatch(s) and "." not in s))
def test_invalid_segments_are_refused_with_their_position(bad: str) -> None:
    with pytest.raises(InvalidInput, match="segment 2"):
        paths.parse_path(f"root.ok.{bad}")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("", "non-empty string"),
        ("acme", "must start with 'root'"),
        ("root.", "segment 1 is empty"),
        ("root..vat", "segment 1 is empty"),
        ("root.Acme", "segment 1 'Acme'"),
        ("root.-acme", "segment 1 '-acme'"),
        ("root." + "a" * 64, "segment 1"),
    ],
)
def test_precise_messages(path: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as raised:
        paths.parse_path(path)
    assert raised.value.code == "invalid_path"


def test_root_alone_has_no_segments() -> None:
    assert paths.parse_path("root") == ()
