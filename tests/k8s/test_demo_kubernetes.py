"""`topoq demo --executor kubernetes`: the demo's story on a test bed it brings up (64 KWOK
nodes shaped as the demo cluster), every scene shown, and the bed stopped after it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.k8s.conftest import assets_or_skip
from topoq.testbeds.daemons import recorded
from topoq.testbeds.kubernetes import ASSETS_ENV


def test_the_quick_demo_plays_every_scene_on_kubernetes_and_stops_its_bed(tmp_path: Path) -> None:
    assets = assets_or_skip()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TOPOQ_")}
    data = tmp_path / "demo"
    run = subprocess.run(
        [sys.executable, "-m", "topoq", "demo", "--quick", "--executor", "kubernetes",
         "--data-dir", str(data)],
        capture_output=True, text=True, timeout=600, check=False,
        env=environment | {ASSETS_ENV: str(assets)},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "All 5 scenes showed what they should" in run.stdout
    assert "its placement says so" in run.stdout  # where jobs ran, read from topoq's placement
    assert "get pods -A -o wide" in run.stdout
    assert not recorded(data / "bed")  # every daemon of the bed was stopped
