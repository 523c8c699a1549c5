"""The kube-scheduler vs topoq benchmark (``benchmarks/kubernetes_scale.py``) on a small bed, so
that it cannot rot: both schedulers bind every pod, and topoq keeps each gang in one layer-3
domain. Decisions only; no number is checked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import kubernetes_scale
from tests.k8s.conftest import assets_or_skip


def test_both_schedulers_bind_every_pod_and_topoq_keeps_gangs_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assets_or_skip()
    out = tmp_path / "runs.json"
    assert kubernetes_scale.main(["--nodes", "32", "--pods", "64", "--json", str(out)]) == 0
    kube, topoq = json.loads(out.read_text())
    assert (kube["scheduler"], topoq["scheduler"]) == ("kube-scheduler", "topoq")
    assert kube["bound"] == topoq["bound"] == 64
    assert topoq["spans"] == {"1": 8}  # every gang of 8 pods inside one layer-3 domain
    assert "pods per CPU s" in capsys.readouterr().out
