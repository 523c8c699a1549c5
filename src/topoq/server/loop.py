"""The controller process's loop: a step every half second and whenever an API process
wakes it, never two closer than the last one took; and its garbage collections, moved out of
the steps."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import select
import threading
import time
from collections.abc import Callable

from topoq.engine.controller import Controller

log = logging.getLogger("topoq.server")

LOOP_INTERVAL_S = 0.5
MIN_STEP_GAP_S = 0.1
GC_YOUNG_THRESHOLD = 10_000
"""Allocations between young-generation collections (Python's default is 700)."""
FULL_COLLECTION_INTERVAL_S = 300.0
"""How often the controller process collects its whole heap, between two steps."""


def do_nothing() -> None:
    return None


class ControllerLoop:
    """Runs ``controller.step()`` every ``interval_s`` (counted from the previous step's
    start) and as soon as it is woken (``wake``, or a byte on ``wake_fd`` from an API process),
    but never sooner than ``min_gap_s`` — nor sooner than the previous step took — after the
    previous step ended: a burst of submissions wakes one step, not one per submission, and
    under a stream the steps take at most about half a core however long the queue grows.
    Before each step ``before_step`` runs (taking in the cluster's own Jobs), after it
    ``after_step`` (publishing the metrics). A failing step is logged and the loop goes on.

    The timer counts from the step's start so that an executor that learns of ends only by
    looking (Slurm's ``squeue`` at each step) sees them every ``interval_s`` and not every
    ``interval_s`` plus twice the step: with steps of 0.3 s that was 1.1 s between looks,
    and every gang's end waited that long before the next gang was admitted."""

    def __init__(
        self,
        controller: Controller,
        *,
        interval_s: float = LOOP_INTERVAL_S,
        min_gap_s: float = MIN_STEP_GAP_S,
        before_step: Callable[[], object] = do_nothing,
        after_step: Callable[[], None] = lambda: None,
    ) -> None:
        self.controller = controller
        self.before_step = before_step
        self.interval_s = interval_s
        self.min_gap_s = min_gap_s
        self.after_step = after_step
        self._read_fd, self.wake_fd = os.pipe()
        os.set_blocking(self.wake_fd, False)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="topoq-controller", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        wake_controller(self.wake_fd)

    def stop(self) -> None:
        self._stopped.set()
        self.wake()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        for descriptor in (self._read_fd, self.wake_fd):
            with contextlib.suppress(OSError):
                os.close(descriptor)

    def _run(self) -> None:
        began = time.monotonic()
        while not self._stopped.is_set():
            timeout_s = max(0.0, began + self.interval_s - time.monotonic())
            readable, _, _ = select.select([self._read_fd], [], [], timeout_s)
            if readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._read_fd, 65536)  # every wake so far: one step serves them
            if self._stopped.is_set():
                return
            began = time.monotonic()
            try:
                self.before_step()
                self.controller.step()
                self.after_step()
            except Exception:
                log.exception("a controller step failed; the next one retries")
            # under a stream of submissions, leave the CPU to the requests between steps:
            # the next step takes the whole burst anyway
            self._stopped.wait(max(self.min_gap_s, time.monotonic() - began))


def wake_controller(wake_fd: int) -> None:
    """Ask the controller loop for a step; never blocks (a full pipe already asks)."""
    with contextlib.suppress(BlockingIOError, BrokenPipeError, OSError):
        os.write(wake_fd, b"\0")


class GarbageBetweenSteps:
    """The controller process's full garbage collections, moved out of its steps. At 10,000
    pending jobs the heap holds ~450,000 tracked objects, and a step leaves enough new ones
    behind (diagnostics, views) that Python ran a full collection every two or three steps,
    ~175 ms inside whichever step it fell in (with ``settle_garbage_collector``'s young
    threshold as well, a step's collections went from ~100 to ~30 ms at 10,000 pending
    jobs, and none is a full one). After each step everything alive is frozen
    (``gc.freeze``: what is frozen is never scanned; what dies is still freed at once), so
    the collections inside a step scan only what that step made; every
    ``FULL_COLLECTION_INTERVAL_S`` the heap is unfrozen and collected whole, between steps,
    so reference cycles that became garbage after being frozen are reclaimed too."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = FULL_COLLECTION_INTERVAL_S,
    ) -> None:
        self.clock = clock
        self.interval_s = interval_s
        self._collected_at = clock()

    def after_step(self) -> None:
        now = self.clock()
        if now - self._collected_at >= self.interval_s:
            gc.unfreeze()
            gc.collect()
            self._collected_at = now
        gc.freeze()


def settle_garbage_collector() -> None:
    """Keep what startup built (modules, the app, its schemas: most of the heap) out of the
    collector's full passes, and run those passes less often. A full pass over a server's
    heap stops every request for about 100 ms, which is what the slowest requests waited."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
