"""A quota check's message and numbers are written out when first read, and say what the
figures were at the check: the books charged after it change neither."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.quota import QuotaCheck, QuotaVerdict
from topoq.domain.governance import TeamName
from topoq.testing.governance import P5

from .test_cohort_quota import deep_book, gpus

TEAMS = ["a", "borrower", "b", "c", "d"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from([0, 8, 16, 24]), min_size=5, max_size=5),
    st.sampled_from(TEAMS),
    st.sampled_from([0, 8, 16, 32, 48]),
    st.lists(st.tuples(st.sampled_from(TEAMS), st.sampled_from([8, 16])), min_size=1, max_size=4),
    st.sampled_from([None, 0, 8, 24]),
    st.sampled_from([None, 0, 8]),
)
def test_a_check_read_after_later_charges_says_what_it_said_when_made(
    used: list[int],
    who: str,
    wanted: int,
    charges: list[tuple[str, int]],
    borrow: int | None,
    lend: int | None,
) -> None:
    book = deep_book(used, borrow, lend)
    unread = book.check(TeamName(who), P5, gpus(wanted))
    for team, amount in charges:  # the books move on before the check is read
        book.charge(TeamName(team), P5, gpus(amount))
    read_at_once = deep_book(used, borrow, lend).check(TeamName(who), P5, gpus(wanted))
    assert unread.message == read_at_once.message
    assert dict(unread.numbers) == dict(read_at_once.numbers)
    assert unread == read_at_once
    assert unread.verdict is read_at_once.verdict
    assert unread.team_only == read_at_once.team_only


def test_a_check_given_its_message_compares_as_one_written_out() -> None:
    given_at_once = QuotaCheck(QuotaVerdict.NO_QUOTA, "no room", {"used": 8}, team_only=True)
    written_later = QuotaCheck(
        QuotaVerdict.NO_QUOTA, team_only=True, explain=lambda: ("no room", {"used": 8})
    )
    assert given_at_once == written_later
    assert hash(given_at_once) == hash(written_later)
    assert written_later.numbers == {"used": 8}
    assert QuotaCheck(QuotaVerdict.NO_QUOTA, "other") != written_later
