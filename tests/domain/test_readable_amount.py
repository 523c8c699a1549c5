"""How a lint finding writes an amount: CPU in cores (to the milli-core, never in exponent
form, however large), memory in the largest unit it reaches, anything else as a count."""

from __future__ import annotations

import pytest

from topoq.domain.lint import readable_amount


@pytest.mark.parametrize(
    ("resource", "amount", "shown"),
    [
        ("cpu", 2_159_640, "2159.64 cpu"),
        ("cpu", 18_004_200_000, "18004200 cpu"),  # was 1.80042e+07 cpu
        ("cpu", 123_456_789, "123456.789 cpu"),
        ("cpu", 500, "0.5 cpu"),
        ("cpu", 1_000, "1 cpu"),
        ("memory", 2 * 2**40, "2Ti memory"),
        ("nvidia.com/gpu", 64, "64 nvidia.com/gpu"),
    ],
)
def test_an_amount_reads_as_a_user_writes_it(resource: str, amount: int, shown: str) -> None:
    assert readable_amount(resource, amount) == shown
