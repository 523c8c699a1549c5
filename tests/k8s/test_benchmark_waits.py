"""The Kubernetes benchmarks' waits end when nothing more can come: a daemon of the bed gone
(CI once saw a bed without its controller manager, and a benchmark waiting twice half an
hour for pods no controller would make), or the time given run out, with how many were seen."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kubernetes import client

from benchmarks.kubernetes_scale import BoundWatch
from tests.k8s.conftest import assets_or_skip
from topoq.testbeds.daemons import BedError, DaemonExited, kill_daemon
from topoq.testbeds.kubernetes import BedShape, bring_up, tear_down


def test_a_wait_ends_at_its_time_and_at_once_when_the_bed_lost_a_daemon(tmp_path: Path) -> None:
    directory = tmp_path / "bed"
    bed = bring_up(directory, BedShape(1, 1), assets=assets_or_skip(), ports="free")
    try:
        core = client.CoreV1Api(bed.api_client())
        watcher = BoundWatch(core, "bench=never", 1)
        with pytest.raises(BedError, match="0 of 1 pods bound after 1 s"):
            watcher.wait(bed, timeout_s=1)
        kill_daemon(directory, "scheduler")
        began = time.monotonic()
        with pytest.raises(DaemonExited, match="scheduler"):
            watcher.wait(bed, timeout_s=600)
        assert time.monotonic() - began < 30
        watcher.stop()
    finally:
        tear_down(directory)
