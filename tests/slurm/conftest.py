"""Tests against a real Slurm cluster (``topoq.testbeds.slurm``): one bed of 16 nodes × 8 fake
GPUs (4 leaf switches of 4 nodes, 2 spines, a root) for the session, stopped by PID at the end,
also when tests fail. The bed installs Debian's Slurm packages when they are missing (as root);
where it cannot run (not root), these tests are skipped — except under CI, where they fail."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from topoq.testbeds.slurm import SlurmBed, SlurmShape, bring_up, tear_down

BED_SHAPE = SlurmShape(leaves=4, nodes_per_leaf=4, leaves_per_spine=2)


def root_or_skip() -> None:
    if os.geteuid() != 0:
        reason = "the Slurm test bed runs its daemons as root"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def slurm_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmBed]:
    root_or_skip()
    directory = tmp_path_factory.mktemp("slurm-bed")
    try:
        yield bring_up(directory, BED_SHAPE)
    finally:
        tear_down(directory)
