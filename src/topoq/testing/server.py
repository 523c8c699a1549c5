"""Helpers for tests and benchmarks that drive a real ``topoq server``: a submission body that
takes one whole node, and the server's API processes as the kernel lists them (all of them,
those serving, and the warmed spares, told apart by the name each gives itself,
``/proc/<pid>/comm``)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from topoq.api_workers import SERVING_NAME, SPARE_NAME


def whole_node_submission(job_id: str, team: str) -> dict[str, object]:
    """A ``POST /jobs`` body: one pod of 8 GPUs (a whole node) for ``team``."""
    return {
        "format": "topoq",
        "team": team,
        "document": {
            "apiVersion": "topoq.io/v1",
            "kind": "Job",
            "metadata": {"name": job_id},
            "spec": {"podSets": [{"name": "w", "count": 1, "requests": {"nvidia.com/gpu": 8}}]},
        },
    }


def serving_api_process_ids(server_pid: int) -> list[int]:
    """The server's API processes that serve requests now."""
    return [pid for pid in api_process_ids(server_pid) if _name(pid) == SERVING_NAME]


def spare_api_process_ids(server_pid: int) -> list[int]:
    """The server's warmed spare API processes, waiting to replace one that dies."""
    return [pid for pid in api_process_ids(server_pid) if _name(pid) == SPARE_NAME]


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def api_process_ids(server_pid: int) -> list[int]:
    """The server's API processes, serving, spare or starting: its children started with
    ``--api-process`` (Linux)."""
    found = []
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(OSError):
                arguments = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                if b"--api-process" in arguments:
                    found.append(int(child))
    return found
