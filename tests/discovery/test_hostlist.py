"""Slurm hostlist expressions: expansion, compression and their round trip."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topoq.discovery.hostlist import MAX_EXPANDED_NAMES, compress_hostlist, expand_hostlist
from topoq.domain.errors import InvalidInputError


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("", []),
        ("  ", []),
        ("c", ["c"]),
        ("p5-001", ["p5-001"]),
        ("a1,b[1-3],c", ["a1", "b1", "b2", "b3", "c"]),
        ("p5-[001-003]", ["p5-001", "p5-002", "p5-003"]),
        ("p5-[001-002,020,030-031]", ["p5-001", "p5-002", "p5-020", "p5-030", "p5-031"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),
        ("n[08-11]", ["n08", "n09", "n10", "n11"]),
        ("n[098-101]", ["n098", "n099", "n100", "n101"]),
        ("n[7]", ["n7"]),
        ("n[1-2]x", ["n1x", "n2x"]),
        ("[1-2]", ["1", "2"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("a[1-2],a[1-2]", ["a1", "a2", "a1", "a2"]),
        (" gb-[01-02] ", ["gb-01", "gb-02"]),
    ],
)
def test_expand_hostlist_gives_names_in_expression_order(expression: str, names: list[str]) -> None:
    assert expand_hostlist(expression) == names


def test_expand_hostlist_keeps_zero_padding_of_formats_example() -> None:
    names = expand_hostlist("p5-[001-016,020,030-031]")
    assert names[0] == "p5-001"
    assert names[15] == "p5-016"
    assert names[16:] == ["p5-020", "p5-030", "p5-031"]
    assert len(names) == 19


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("p5-[001-016", "never closed"),
        ("p5-001]", "']' without a matching '['"),
        ("p5-[1-2]]", "']' without a matching '['"),
        ("p5-[5-3]", "runs backwards"),
        ("p5-[]", "empty range"),
        ("p5-[1,,2]", "empty range"),
        ("p5-[1,]", "empty range"),
        ("p5-[a-c]", "not a number"),
        ("p5-[1-]", "not a number"),
        ("p5-[-3]", "not a number"),
        ("p5-[1-2-3]", "not a number"),
        ("p5-[1-10:2]", "not a number"),
        ("p[1-[2]]", "inside brackets"),
        ("a,,b", "empty name"),
        (",a", "empty name"),
        ("a,", "empty name"),
        ("a b", "whitespace"),
    ],
)
def test_expand_hostlist_rejects_malformed_expression(expression: str, fragment: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        expand_hostlist(expression)
    assert fragment in caught.value.message
    assert repr(expression.strip()) in caught.value.message
    assert caught.value.hint


def test_expand_hostlist_says_how_to_fix_a_backwards_range() -> None:
    with pytest.raises(InvalidInputError) as caught:
        expand_hostlist("p5-[5-3]")
    assert caught.value.hint is not None
    assert "[3-5]" in caught.value.hint


@pytest.mark.parametrize("expression", ["n[0-9999999999]", "a[0-999999]b[0-9]"])
def test_expand_hostlist_refuses_expressions_with_too_many_names(expression: str) -> None:
    with pytest.raises(InvalidInputError, match=str(MAX_EXPANDED_NAMES)):
        expand_hostlist(expression)


@pytest.mark.parametrize(
    ("names", "expression"),
    [
        ([], ""),
        (["c"], "c"),
        (["p5-001"], "p5-001"),
        ([f"p5-{i:03d}" for i in [*range(1, 17), 20, 30, 31]], "p5-[001-016,020,030-031]"),
        (["a1", "b1", "b2", "b3", "c"], "a1,b[1-3],c"),
        (["n8", "n9", "n10", "n11"], "n[8-11]"),
        (["n08", "n09", "n10", "n11"], "n[08-11]"),
        (["n098", "n099", "n100"], "n[098-100]"),
        (["n1", "n01"], "n[1,01]"),
        (["p5-003", "p5-001", "p5-002", "p5-001"], "p5-[001-003]"),
        (["n1x", "n2x", "n3"], "n[1-2]x,n3"),
        (["rack1-n01", "rack1-n02"], "rack1-n[01-02]"),
        (["leaf1", "leaf2", "spine1"], "leaf[1-2],spine1"),
    ],
)
def test_compress_hostlist_folds_names_into_ranges(names: list[str], expression: str) -> None:
    assert compress_hostlist(names) == expression


@pytest.mark.parametrize("name", ["", "a b", "a,b", "a[1]", "]"])
def test_compress_hostlist_rejects_names_a_hostlist_cannot_hold(name: str) -> None:
    with pytest.raises(InvalidInputError, match="cannot be written in a hostlist"):
        compress_hostlist(["ok1", name])


_prefixes = st.sampled_from(["", "n", "p5-", "gb200-", "rack1-n", "a.b_"])
_suffixes = st.sampled_from(["", "x", "-ib", ".local"])
_numbers = st.builds(
    lambda value, width: f"{value:0{width}d}",
    st.integers(min_value=0, max_value=130),
    st.integers(min_value=1, max_value=4),
)
_numbered_names = st.builds(lambda p, n, s: f"{p}{n}{s}", _prefixes, _numbers, _suffixes)
_plain_names = st.sampled_from(["login", "head-node", "ctl", "a.b"])
_names = st.lists(st.one_of(_numbered_names, _plain_names), max_size=60)


@given(_names)
def test_compress_then_expand_gives_every_name_once(names: list[str]) -> None:
    expanded = expand_hostlist(compress_hostlist(names))
    assert sorted(expanded) == sorted(set(names))
    assert len(expanded) == len(set(expanded))


@given(_names)
def test_compress_is_canonical(names: list[str]) -> None:
    compressed = compress_hostlist(names)
    assert compress_hostlist(expand_hostlist(compressed)) == compressed
    assert compress_hostlist(reversed(names)) == compressed


_ranges = st.builds(
    lambda low, length, width: f"{low:0{width}d}-{low + length}" if length else f"{low:0{width}d}",
    st.integers(min_value=0, max_value=99),
    st.integers(min_value=0, max_value=12),
    st.integers(min_value=1, max_value=3),
)
_expressions = st.lists(
    st.builds(
        lambda prefix, ranges, suffix: f"{prefix}[{','.join(ranges)}]{suffix}",
        _prefixes,
        st.lists(_ranges, min_size=1, max_size=4),
        _suffixes,
    ),
    min_size=1,
    max_size=4,
).map(",".join)


@given(_expressions)
def test_expand_then_compress_keeps_the_set_of_names(expression: str) -> None:
    names = expand_hostlist(expression)
    assert sorted(set(expand_hostlist(compress_hostlist(names)))) == sorted(set(names))


@given(st.lists(st.text(alphabet="ab01.9-", min_size=1, max_size=7), max_size=40))
def test_compress_round_trips_arbitrary_names_with_digits_anywhere(names: list[str]) -> None:
    compressed = compress_hostlist(names)
    expanded = expand_hostlist(compressed)
    assert sorted(expanded) == sorted(set(names))
    assert compress_hostlist(expanded) == compressed


@pytest.mark.parametrize(
    "expr",
    [
        "n[0-999998," * 1 + ",".join(["0-999998"] * 20) + "]",
        ",".join(f"r{i}-[0-999999]" for i in range(5)),
        "a[1-1000]b[1-1000]c[1-1000]",
        "n" + "[0-9]" * 50,
        "n[1-99999999999999999999]",
    ],
    ids=["ranges-in-one-bracket", "items", "product", "many-groups", "billions"],
)
def test_an_expansion_to_more_names_than_the_limit_is_refused_before_it_is_built(
    expr: str,
) -> None:
    started = time.thread_time()
    with pytest.raises(InvalidInputError, match="more than 1000000 names"):
        expand_hostlist(expr)
    assert time.thread_time() - started < 1


def test_an_error_about_a_long_expression_quotes_only_its_start() -> None:
    expr = "n[1-2]," * 200_000 + "x["
    with pytest.raises(InvalidInputError) as raised:
        expand_hostlist(expr)
    assert len(raised.value.render()) < 400
