"""The group commit's queue on its own (no database): who leads, who shares a transaction,
and that a failed transaction fails its own entries and nobody else's."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from tests.store.waiting import DEADLINE_S, wait_until
from topoq.store import StoreUnavailable
from topoq.store.group_commit import GroupCommit


class Recorder:
    """A commit that records its batches; the first one waits until released. Items named
    ``bad…`` fail alone; with ``broken``, every batch after the first raises."""

    def __init__(self, *, broken: bool = False) -> None:
        self.broken = broken
        self.batches: list[list[str]] = []
        self.first_started = threading.Event()
        self.release_first = threading.Event()

    def __call__(self, batch: Sequence[str]) -> list[str | Exception]:
        self.batches.append(list(batch))
        if len(self.batches) == 1:
            self.first_started.set()
            self.release_first.wait(timeout=DEADLINE_S)
        elif self.broken:
            raise RuntimeError("the leader broke")
        return [ValueError(item) if item.startswith("bad") else item.upper() for item in batch]


@dataclass
class Queued:
    """Callers started one by one, each after the previous one queued."""

    threads: list[threading.Thread] = field(default_factory=list)
    outcomes: dict[str, object] = field(default_factory=dict)

    def join(self) -> dict[str, object]:
        for thread in self.threads:
            thread.join()
        return self.outcomes


def queue_in_order(group: GroupCommit[str, str], items: Sequence[str]) -> Queued:
    """Start a caller per item while a leader holds the queue, in this order."""
    queued = Queued()

    def one(item: str) -> None:
        try:
            queued.outcomes[item] = group.run(item)
        except Exception as error:
            queued.outcomes[item] = error

    for item in items:
        before = group.queued
        thread = threading.Thread(target=one, args=(item,))
        thread.start()
        queued.threads.append(thread)
        wait_until(lambda: group.queued > before, f"{item} to queue")  # noqa: B023 used at once
    return queued


def test_a_lone_caller_commits_alone_and_gets_its_result() -> None:
    recorder = Recorder()
    recorder.release_first.set()  # nobody queues behind a lone caller
    group: GroupCommit[str, str] = GroupCommit(recorder)
    assert group.run("a") == "A"
    assert group.run("b") == "B"
    assert recorder.batches == [["a"], ["b"]]
    assert group.queued == 0


def behind_a_held_leader(
    items: Sequence[str], *, max_batch: int = 256, broken: bool = False
) -> tuple[list[list[str]], dict[str, object]]:
    """Callers for ``items`` queue in order while a first caller's commit is held, then it
    is released. Returns the batches committed and each item's outcome."""
    recorder = Recorder(broken=broken)
    group: GroupCommit[str, str] = GroupCommit(recorder, max_batch=max_batch)
    leader = threading.Thread(target=group.run, args=("first",))
    leader.start()
    recorder.first_started.wait(timeout=DEADLINE_S)
    queued = queue_in_order(group, items)
    recorder.release_first.set()
    leader.join()
    outcomes = queued.join()
    assert group.queued == 0
    return recorder.batches, outcomes


def test_callers_queued_behind_a_leader_share_the_next_transaction_in_order() -> None:
    batches, outcomes = behind_a_held_leader(["a", "bad-b", "c"])
    assert batches == [["first"], ["a", "bad-b", "c"]]
    assert outcomes["a"] == "A"
    assert outcomes["c"] == "C"
    assert isinstance(outcomes["bad-b"], ValueError)


def test_a_batch_is_at_most_max_batch_entries_and_the_rest_lead_the_next() -> None:
    batches, _ = behind_a_held_leader(["a", "b", "c"], max_batch=2)
    assert batches == [["first"], ["a", "b"], ["c"]]


def test_a_commit_that_raises_fails_its_batch_and_the_queue_goes_on() -> None:
    calls: list[list[str]] = []

    def commit(batch: Sequence[str]) -> list[str | Exception]:
        calls.append(list(batch))
        if len(calls) == 1:
            raise RuntimeError("the leader broke")
        return [item.upper() for item in batch]

    group: GroupCommit[str, str] = GroupCommit(commit)
    with pytest.raises(RuntimeError, match="leader broke"):
        group.run("a")
    assert group.run("b") == "B"
    assert group.queued == 0


def test_followers_of_a_leader_that_raised_are_told_nothing_was_stored() -> None:
    _, outcomes = behind_a_held_leader(["a", "b"], broken=True)
    assert isinstance(outcomes["a"], RuntimeError)  # "a" led the transaction that broke
    assert isinstance(outcomes["b"], StoreUnavailable)
    assert "not stored" in str(outcomes["b"])
