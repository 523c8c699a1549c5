"""Pods a crashed control plane left running, found and stopped by the next executor on the
same work directory, so a requeued gang never runs twice.

Each running attempt records its pods' process ids in ``pids.json`` beside its logs; and every
pod process carries the executor's marker in its environment (``TOPOQ_POD``), which is how
processes that left the pod's session, or were spawned just before a crash and never
recorded, are found wherever their working directory is."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

from topoq.executors.local.layout import EXECUTOR_ID_FILE, write_private_text
from topoq.executors.local.process_table import kill_until_gone, marker_of

LEFTOVERS = "pids.json"
"""Beside each running attempt's logs: the process ids of its pods."""


def record_pids(directory: Path, job: str, pids: Sequence[int]) -> None:
    write_private_text(directory / LEFTOVERS, json.dumps({"job": job, "pids": list(pids)}) + "\n")


def forget_pids(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (directory / LEFTOVERS).unlink()


def stop_leftovers(work_dir: Path, executor_marker: str | None = None) -> list[int]:
    """SIGKILL every process a previous executor of ``work_dir`` left: the recorded pods whose
    environment still carries ``executor_marker`` (so a reused pid is left alone), their
    process groups, sessions and descendants, and every other process carrying the marker.
    Forgets the records. Returns the pids killed. Without ``executor_marker``, the id kept in
    ``work_dir`` is used (none: nothing ran there)."""
    if executor_marker is None:
        try:
            executor_marker = (work_dir / EXECUTOR_ID_FILE).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return []
        if not executor_marker:
            return []
        executor_marker += "/"
    leaders = []
    for record in sorted(work_dir.glob(f"*/*/*/{LEFTOVERS}")):
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            pids = [int(pid) for pid in json.loads(record.read_text()).get("pids", [])]
            leaders += [pid for pid in pids if _carries(pid, executor_marker)]
        record.unlink(missing_ok=True)
    return sorted(kill_until_gone(executor_marker, leaders))


def _carries(pid: int, executor_marker: str) -> bool:
    marker = marker_of(pid)
    return marker is not None and marker.startswith(executor_marker)
