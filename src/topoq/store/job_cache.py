"""What a store remembers of jobs between reads: each job's spec, which never changes once
stored, its phase history, which only grows (``job_events`` is append-only), and the record as
last read, with its row version. The controller reads every unfinished job each cycle; with
this it decodes only the jobs that changed since (every change of a job row bumps its
version), and of those only the specs of new jobs and the histories of jobs that moved (a row's
``history_length`` says whether the remembered history is still whole). Nothing here can be
stale: a record is used only when its version is the stored one, a history only when its length
is the stored one, and entries of a given length never change."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from topoq.domain.job import JobSpec, PhaseChange
from topoq.store.records import JobRecord

DEFAULT_CAPACITY = 20_000
"""Jobs remembered (the least recently read are forgotten first): a queue of this many
unfinished jobs is read without decoding; past it, reads decode as if nothing was remembered."""


@dataclass(frozen=True)
class KnownJob:
    spec: JobSpec
    history: tuple[PhaseChange, ...]
    record: JobRecord | None = None

    def record_at(self, version: int) -> JobRecord | None:
        """The remembered record if the row still has this version."""
        if self.record is not None and self.record.version == version:
            return self.record
        return None


class JobCache:
    """Thread-safe, bounded; least recently read out first."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, KnownJob] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, job_ids: Iterable[str]) -> dict[str, KnownJob]:
        found: dict[str, KnownJob] = {}
        with self._lock:
            for job_id in job_ids:
                known = self._entries.get(job_id)
                if known is not None:
                    self._entries.move_to_end(job_id)
                    found[job_id] = known
        return found

    def put(self, entries: Mapping[str, KnownJob]) -> None:
        with self._lock:
            self._entries.update(entries)
            for job_id in entries:
                self._entries.move_to_end(job_id)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
