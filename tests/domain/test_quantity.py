"""Kubernetes quantities parse to exact canonical integers; bad ones say what is allowed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topoq.domain.errors import InvalidInputError
from topoq.domain.quantity import format_quantity, parse_quantity
from topoq.domain.resources import Resources


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        ("cpu", "500m", 500),
        ("cpu", "2", 2000),
        ("cpu", "191450m", 191450),
        ("cpu", 1.5, 1500),
        ("memory", "16Gi", 16 * 2**30),
        ("memory", "16G", 16 * 10**9),
        ("memory", "2097152Mi", 2 * 2**40),
        ("memory", "1e3", 1000),
        ("memory", "0.5Ki", 512),
        ("memory", "100m", 1),  # a fraction of a byte rounds up, as Kubernetes does
        ("nvidia.com/gpu", "8", 8),
        ("nvidia.com/gpu", 8, 8),
        ("vpc.amazonaws.com/efa", "32", 32),
        ("example.com/foo", "3k", 3000),
    ],
)
def test_quantities_parse_to_canonical_units(resource: str, text: str | int, expected: int) -> None:
    assert parse_quantity(resource, text) == expected


@pytest.mark.parametrize("text", ["", "eight", "8 Gi", "1.2.3", "Gi", "--1", "1Gb"])
def test_malformed_quantities_are_rejected_with_the_allowed_forms(text: str) -> None:
    with pytest.raises(InvalidInputError, match=r"not a Kubernetes quantity.*500m"):
        parse_quantity("memory", text)


def test_negative_and_boolean_quantities_are_rejected() -> None:
    with pytest.raises(InvalidInputError, match="negative"):
        parse_quantity("cpu", "-1")
    with pytest.raises(InvalidInputError, match="not a quantity"):
        parse_quantity("cpu", True)  # type: ignore[arg-type]  # YAML's `true` must not pass as 1


@given(st.integers(0, 10**7), st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]))
def test_format_then_parse_gives_the_same_amount(amount: int, resource: str) -> None:
    assert parse_quantity(resource, format_quantity(resource, amount)) == amount


def test_resources_parse_names_the_field_of_a_bad_value() -> None:
    with pytest.raises(InvalidInputError, match=r"nodes\.json: items\[0\]\.memory: 'lots' is not"):
        Resources.parse({"memory": "lots"}, where="nodes.json: items[0]")


def test_resources_arithmetic_drops_zero_entries() -> None:
    a = Resources.parse({"cpu": "1", "nvidia.com/gpu": 2})
    b = Resources.parse({"nvidia.com/gpu": 2})
    assert a - b == Resources.parse({"cpu": "1"})
    assert (a + b).amount("nvidia.com/gpu") == 4
    assert b.scaled(3).fits_in(a.scaled(3)) and not a.fits_in(b)
