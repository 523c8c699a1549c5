"""Resources arithmetic: the same as per-name integer arithmetic on plain mappings, with zero
entries dropped, and equal vectors equal and hashed alike however they were made."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from topoq.domain.resources import Resources

NAMES = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", "vpc.amazonaws.com/efa"])
AMOUNTS = st.dictionaries(NAMES, st.integers(-(2**40), 2**40), max_size=5)


def reference(left: dict[str, int], right: dict[str, int], sign: int) -> dict[str, int]:
    names = set(left) | set(right)
    combined = {name: left.get(name, 0) + sign * right.get(name, 0) for name in names}
    return {name: value for name, value in combined.items() if value != 0}


@given(AMOUNTS, AMOUNTS)
def test_sums_and_differences_are_per_name_with_zeros_dropped(
    left: dict[str, int], right: dict[str, int]
) -> None:
    a, b = Resources(left), Resources(right)
    assert dict(a + b) == reference(left, right, 1)
    assert dict(a - b) == reference(left, right, -1)
    assert a + b == b + a and hash(a + b) == hash(b + a)
    assert (a + b) - b == a and hash((a + b) - b) == hash(a)
    assert a + b == a + dict(right)  # a plain mapping adds as well


@given(AMOUNTS)
def test_a_vector_keeps_its_names_in_order_whatever_built_it(amounts: dict[str, int]) -> None:
    built = Resources(amounts)
    summed = Resources() + built
    rebuilt = Resources(dict(reversed(list(amounts.items()))))
    assert list(built) == sorted(built) == list(summed) == list(rebuilt)
    assert built == summed == rebuilt and len({hash(built), hash(summed), hash(rebuilt)}) == 1
    assert 0 not in built.values() and dict(built.items()) == dict(built)


@given(AMOUNTS, st.sets(NAMES))
def test_fixed_order_amounts_and_restrictions_are_the_vector_they_stand_for(
    amounts: dict[str, int], kept: set[str]
) -> None:
    built = Resources(amounts)
    names = tuple(sorted(set(amounts) | kept))
    again = Resources.of_amounts(names, [built.amount(name) for name in names])
    assert again == built and hash(again) == hash(built) and list(again) == list(built)
    restricted = built.restricted_to(kept)
    assert restricted == Resources({n: v for n, v in amounts.items() if n in kept})
    assert hash(restricted) == hash(Resources(dict(restricted)))
