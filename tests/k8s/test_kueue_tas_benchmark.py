"""The Kueue-beside-topoq benchmark (``benchmarks/kueue_tas.py``) on a small bed, so that it
cannot rot: real Kueue and then topoq admit every Job, every pod is bound, and each Job's pods
stay in one layer-3 domain under both. Decisions only; no number is checked."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import kueue_tas
from tests.k8s.conftest import assets_or_skip


def test_kueue_and_topoq_admit_every_job_of_the_same_workload(tmp_path: Path) -> None:
    assets_or_skip()
    out = tmp_path / "runs.json"
    arguments = ["--nodes", "32", "--jobs", "6", "--pods", "4", "--json", str(out)]
    assert kueue_tas.main(arguments) == 0
    kueue, topoq = json.loads(out.read_text())
    assert (kueue["scheduler"], topoq["scheduler"]) == ("Kueue (TAS)", "topoq")
    assert kueue["admitted"] == topoq["admitted"] == 6
    assert kueue["spans"] == topoq["spans"] == {"1": 6}
