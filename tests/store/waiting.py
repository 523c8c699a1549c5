"""Waiting for another thread to reach a point, with a deadline that only guards against a
hang (tests assert what happened, never how long it took)."""

from __future__ import annotations

import time
from collections.abc import Callable

DEADLINE_S = 30.0


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.001)
