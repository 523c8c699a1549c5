"""Helpers for tests and benchmarks that drive a real ``topoq server``: a submission body that
takes one whole node, and the server's API processes as the kernel lists them."""

from __future__ import annotations

import contextlib
from pathlib import Path


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


def api_process_ids(server_pid: int) -> list[int]:
    """The server's API processes: its children started with ``--api-process`` (Linux)."""
    found = []
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            with contextlib.suppress(OSError):
                arguments = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                if b"--api-process" in arguments:
                    found.append(int(child))
    return found
