"""Kubernetes quantities parse to exact canonical integers; bad ones say what is allowed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
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


@pytest.mark.parametrize(
    ("resource", "text", "message"),
    [
        ("cpu", "9" * 5000, "longer than 64 characters"),
        ("cpu", 10**40, "more than any cluster"),
        ("memory", "1e999999999", "exponent beyond"),
        ("memory", "1e-999999999", "exponent beyond"),
        ("memory", "1e19", "more than any cluster"),
        ("memory", "9999999999Ei", "more than any cluster"),
        ("nvidia.com/gpu", float("inf"), "not a finite number"),
        ("nvidia.com/gpu", float("nan"), "not a finite number"),
        ("nvidia.com/gpu", "Infinity", "not a Kubernetes quantity"),
        ("cpu", 1e30, "more than any cluster"),
    ],
)
def test_quantities_too_long_too_large_or_not_finite_are_refused_at_once(
    resource: str, text: str | float, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_quantity(resource, text)


@pytest.mark.parametrize(
    ("resource", "text"),
    [
        ("nvidia.com/gpu", 0.5),
        ("nvidia.com/gpu", "0.5"),
        ("nvidia.com/gpu", "1500m"),
        ("aws.amazon.com/neurondevice", "1.1"),
        ("vpc.amazonaws.com/efa", 2.5),
        ("pods", "10.5"),
        ("example.com/foo", "1u"),
    ],
)
def test_a_fraction_of_a_resource_counted_in_whole_units_is_refused(
    resource: str, text: str | float
) -> None:
    with pytest.raises(InvalidInputError, match="must be a whole number") as raised:
        parse_quantity(resource, text)
    assert resource in raised.value.render()


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        ("nvidia.com/gpu", "2000m", 2),
        ("nvidia.com/gpu", 8.0, 8),
        ("pods", "1k", 1000),
        ("cpu", "0.5", 500),
        ("memory", "0.5", 1),
        ("ephemeral-storage", "1.5", 2),
        ("hugepages-2Mi", "1.5", 2),
    ],
)
def test_whole_valued_counts_and_fractions_of_cpu_or_bytes_keep_their_rules(
    resource: str, text: str | float, expected: int
) -> None:
    assert parse_quantity(resource, text) == expected


def test_resources_parse_names_the_field_and_what_to_write_for_half_a_gpu() -> None:
    with pytest.raises(InvalidInputError) as raised:
        Resources.parse({"nvidia.com/gpu": 0.5}, where="job.yaml: podSets[0].requests")
    assert raised.value.where == "job.yaml: podSets[0].requests.nvidia.com/gpu"
    assert "whole number" in raised.value.render()


@settings(deadline=1000)
@given(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", "example.com/foo"]),
    st.one_of(
        st.text(max_size=80),
        st.from_regex(r"[+-]?[0-9]{0,40}(\.[0-9]{0,40})?([eE][+-]?[0-9]{1,12}|[KMGTPE]i?|[mun])?"),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(),
    ),
)
def test_any_quantity_parses_within_bounds_or_is_refused(resource: str, text: str | float) -> None:
    try:
        amount = parse_quantity(resource, text)
    except InvalidInputError:
        return
    assert 0 <= amount <= 2**63 - 1


@pytest.mark.parametrize(
    "name", ["", "nvidia.com/", "/gpu", "a b", "Nvidia.com/gpu", "x" * 64, "a/b/c", "gpu\n"]
)
def test_a_resource_name_that_kubernetes_would_refuse_is_refused(name: str) -> None:
    with pytest.raises(InvalidInputError, match="not a valid resource name"):
        Resources.parse({name: 1}, where="requests")


@pytest.mark.parametrize(
    "name", ["cpu", "nvidia.com/gpu", "hugepages-2Mi", "vpc.amazonaws.com/efa", "example.com/Foo_1"]
)
def test_resource_names_as_kubernetes_writes_them_are_accepted(name: str) -> None:
    assert Resources.parse({name: 1}).amount(name) >= 1


def test_more_resource_names_than_the_limit_are_refused_before_any_is_parsed() -> None:
    with pytest.raises(InvalidInputError, match="more than 64 resources"):
        Resources.parse({f"example.com/r{index}": 1 for index in range(65)}, where="requests")
