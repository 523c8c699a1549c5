"""Group commit: callers that write at the same moment share one transaction.

A caller queues its entry. If the queue was empty it leads: it commits every entry queued so
far (its own first, then the others in the order they came) in one transaction and hands each
entry its outcome. Callers that queued behind a leader wait; one whose entry a leader
committed returns at once, and the caller at the head of the queue when a leader finishes
leads next, with everything that queued meanwhile. No thread of its own: the callers do the
work. While one transaction commits (SQLite's fsync, a PostgreSQL round trip) the next batch
gathers, so under load a transaction carries many entries and its fixed cost (connection,
BEGIN, COMMIT and its fsync) is shared; a lone caller commits alone, as before. LevelDB's
writer queue is the model.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Generic, TypeVar, cast

from topoq.store.errors import StoreUnavailable

T = TypeVar("T")
R = TypeVar("R")

MAX_BATCH = 256
"""Entries per transaction at most; the rest lead the next one."""

Commit = Callable[[Sequence[T]], Sequence[R | Exception]]
"""Writes a batch in one transaction (or, when that fails, as it can) and returns each entry's
outcome in order: its result, or the error its caller gets. It should not raise."""


@dataclass(eq=False)
class _Waiter(Generic[T, R]):
    item: T
    woken: threading.Event = field(default_factory=threading.Event)
    """Set once: when a leader committed the entry, or when it is the head and must lead."""
    done: bool = False
    outcome: R | Exception | None = None

    def result(self) -> R:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return cast(R, self.outcome)


class GroupCommit(Generic[T, R]):
    def __init__(self, commit: Commit[T, R], *, max_batch: int = MAX_BATCH) -> None:
        self._commit = commit
        self._max_batch = max_batch
        self._mutex = threading.Lock()
        self._queue: deque[_Waiter[T, R]] = deque()

    @property
    def queued(self) -> int:
        """Entries waiting or being committed."""
        with self._mutex:
            return len(self._queue)

    def run(self, item: T) -> R:
        """Commit ``item`` (with whatever else is queued then); its result, or raises its
        error. Returns only after the transaction that carried it has committed."""
        waiter: _Waiter[T, R] = _Waiter(item)
        with self._mutex:
            self._queue.append(waiter)
            leads = len(self._queue) == 1
        if not leads:
            waiter.woken.wait()
        if not waiter.done:
            self._lead()
        return waiter.result()

    def _lead(self) -> None:
        """Commit the head of the queue (this caller's entry first) and wake the others."""
        with self._mutex:
            batch = list(islice(self._queue, self._max_batch))
        outcomes: Sequence[R | Exception] = ()
        try:
            outcomes = self._commit([waiter.item for waiter in batch])
        finally:
            if len(outcomes) != len(batch):  # the commit raised: nobody's entry is known stored
                outcomes = [_interrupted() for _ in batch]
            self._finish(batch, outcomes)

    def _finish(self, batch: list[_Waiter[T, R]], outcomes: Sequence[R | Exception]) -> None:
        with self._mutex:
            for waiter, outcome in zip(batch, outcomes, strict=True):
                waiter.outcome, waiter.done = outcome, True
                self._queue.popleft()  # the batch is the head of the queue, in order
            head = self._queue[0] if self._queue else None
        for waiter in batch:
            waiter.woken.set()
        if head is not None:
            head.woken.set()  # it leads the next transaction


def _interrupted() -> Exception:
    return StoreUnavailable(
        "not stored: the transaction that carried this entry was interrupted; try again"
    )
