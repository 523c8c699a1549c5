"""A job's standing in the order is shared by the starvation guard's groups and the teams'
queues while the books stand (``ordering._standing_of``), and worked out again once they
change: the same standing as worked out afresh."""

from __future__ import annotations

from topoq.core.holdings import total_demand
from topoq.core.ordering import NO_USAGE, _standing, _standing_of, order_facts
from topoq.domain.governance import TeamName
from topoq.testing.governance import P5, job, team

from .test_cohort_quota import book_of, gpus


def test_a_standing_is_kept_while_the_books_stand_and_worked_out_again_after_a_charge() -> None:
    book = book_of(team("a", 16), team("b", 16), usage={"a": 8})
    waiting = job("j1", "a", 1)
    kind = order_facts(book.policy, waiting).kind
    within = _standing_of(book, waiting, kind, NO_USAGE)
    assert within == _standing(book, waiting, total_demand(waiting), NO_USAGE)
    assert within[0] == 0  # 8 more GPUs keep team a inside its 16
    book.charge(TeamName("a"), P5, gpus(8))  # now it would borrow
    after = _standing_of(book, waiting, kind, NO_USAGE)
    assert after == _standing(book, waiting, total_demand(waiting), NO_USAGE)
    assert after[0] == 1


def test_a_standing_kept_for_one_usage_is_not_taken_for_another() -> None:
    book = book_of(team("a", 16), usage={"a": 8})
    waiting = job("j1", "a", 1)
    kind = order_facts(book.policy, waiting).kind
    _standing_of(book, waiting, kind, NO_USAGE)
    other: dict[TeamName, float] = {TeamName("a"): 5.0}
    assert _standing_of(book, waiting, kind, other) == _standing(
        book, waiting, total_demand(waiting), other
    )
