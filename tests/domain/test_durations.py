"""Durations are read one way everywhere: seconds, Go-like units, or Slurm's clock forms."""

from __future__ import annotations

import pytest

from topoq.domain.durations import duration_s, format_duration
from topoq.domain.errors import InvalidInputError


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        (90, 90),
        ("90", 90),
        (1.5, 1.5),
        ("45s", 45),
        ("90m", 5400),
        ("2h", 7200),
        ("1h30m", 5400),
        ("1d", 86400),
        ("10:00", 600),
        ("01:00:00", 3600),
        ("2-12", 2 * 86400 + 12 * 3600),
        ("1-02:30", 86400 + 2 * 3600 + 30 * 60),
        ("1-00:00:00", 86400),
    ],
)
def test_each_form_reads_as_its_seconds(written: object, seconds: float) -> None:
    assert duration_s(written, where="timeLimit") == seconds


@pytest.mark.parametrize("written", ["", "soon", "2 h", "1:2:3:4", "-5", True, None, [1]])
def test_what_is_no_duration_is_refused_naming_the_field_and_the_forms(written: object) -> None:
    with pytest.raises(InvalidInputError) as refused:
        duration_s(written, where="spec.timeLimit")
    assert refused.value.where == "spec.timeLimit"
    assert "expected a duration" in refused.value.message and "2h" in (refused.value.hint or "")


@pytest.mark.parametrize("written", [0, -1, "400d", float("inf")])
def test_a_duration_out_of_range_is_refused(written: object) -> None:
    with pytest.raises(InvalidInputError, match="out of range"):
        duration_s(written, where="x")


def test_zero_is_allowed_where_it_means_off() -> None:
    assert duration_s(0, where="starvationGuardS", allow_zero=True) == 0


def test_a_formatted_duration_reads_back_the_same() -> None:
    for seconds in (1, 59, 60, 3600, 5400, 86400 + 61):
        assert duration_s(format_duration(seconds), where="x") == seconds
