"""List, then watch, one kind of object from a thread of its own (as client-go's reflector
does): every change goes on a queue as ``(type, object)`` for the executor's own thread to
take; a watch that ends is resumed from the last resourceVersion seen, and one the API server
answers 410 Gone (the version was compacted away) lists again, which goes on the queue as
``("RELISTED", [objects])`` so that the consumer replaces what it kept. An API server that
restarts or cannot be reached is retried with a backoff; nothing is lost, since a relist
shows what is there now."""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

log = logging.getLogger(__name__)

RELISTED = "RELISTED"
WATCH_TIMEOUT_S = 30
"""How long one watch request may last before it is renewed (the server ends it by then)."""
STOP_WAIT_S = 5.0
BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 5.0)

Change = tuple[str, Any]
T = TypeVar("T")


class Informer:
    """The changes of ``list_call``'s objects (a list function of the official client, e.g.
    ``CoreV1Api.list_pod_for_all_namespaces``), as plain dicts, on ``changes``."""

    def __init__(self, name: str, list_call: Callable[..., Any], **selectors: str) -> None:
        self.name = name
        self._list = list_call
        self._selectors = {key: value for key, value in selectors.items() if value}
        self.changes: queue.SimpleQueue[Change] = queue.SimpleQueue()
        self.listed = threading.Event()
        """Set once the first list is on the queue."""
        self.relists = 0
        self._stopping = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"topoq-{name}-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        response = self._response
        if response is not None:
            try:
                response.shutdown()  # interrupts the read the thread is blocked in
            except Exception:
                log.debug("the %s watch was closed already", self.name)
        self._thread.join(timeout=STOP_WAIT_S)

    def _run(self) -> None:
        failures = 0
        version: str | None = None
        while not self._stopping.is_set():
            try:
                if version is None:
                    version = self._relist()
                version = self._follow(version)
                failures = 0
            except ApiException as error:
                if error.status == 410:
                    version = None  # compacted away: list again
                    continue
                failures = self._back_off(failures, error)
            except Exception as error:  # the API server restarting, a network error
                failures = self._back_off(failures, error)

    def _relist(self) -> str:
        answer = self._list(_preload_content=False, **self._selectors)
        listed = json.loads(answer.data)
        self.changes.put((RELISTED, listed.get("items") or []))
        self.relists += 1
        self.listed.set()
        return str(listed["metadata"]["resourceVersion"])

    def _follow(self, version: str) -> str:
        response = self._list(
            watch=True,
            resource_version=version,
            timeout_seconds=WATCH_TIMEOUT_S,
            allow_watch_bookmarks=True,
            _preload_content=False,
            **self._selectors,
        )
        self._response = response
        try:
            if self._stopping.is_set():  # stopped before the response could be interrupted
                return version
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                if self._stopping.is_set():
                    break
                if not line or line.isspace():
                    continue
                event = json.loads(line)
                kind, found = str(event.get("type")), event.get("object") or {}
                if kind == "ERROR":
                    raise ApiException(status=found.get("code") or 500, reason=found.get("message"))
                version = (found.get("metadata") or {}).get("resourceVersion") or version
                if kind != "BOOKMARK":
                    self.changes.put((kind, found))
        finally:
            self._response = None
            response.close()
            response.release_conn()
        return version

    def _back_off(self, failures: int, error: BaseException) -> int:
        wait = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
        if failures >= 2:
            log.warning("watching %s failed (%s); retrying in %g s", self.name, error, wait)
        self._stopping.wait(wait)
        return failures + 1


def drain(changes: queue.SimpleQueue[T]) -> list[T]:
    """Everything on the queue now, oldest first, without waiting."""
    taken: list[T] = []
    while True:
        try:
            taken.append(changes.get_nowait())
        except queue.Empty:
            return taken


def wait_for(informers: list[Informer], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    return all(
        informer.listed.wait(max(0.0, deadline - time.monotonic())) for informer in informers
    )
