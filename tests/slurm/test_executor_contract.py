"""The executor contract against a real Slurm cluster: every gang is a Slurm job pinned to the
contract's nodes (n00 … n03 of the session's bed, named as the contract's cluster), its pods
real processes that slurmd starts on this machine — so the contract's own programs, pids and
trigger files work as they do for the local executor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.executors.contract import ExecutorContract, ExecutorFactory
from topoq.executors.slurm.executor import SlurmExecutor
from topoq.testbeds.slurm import SlurmBed, reset


class TestSlurmContract(ExecutorContract):
    @pytest.fixture
    def executor_factory(self, slurm_bed: SlurmBed) -> ExecutorFactory:
        return lambda work_dir: SlurmExecutor(work_dir, slurm_bed.slurm_conf)

    @pytest.fixture(autouse=True)
    def nothing_left(self, slurm_bed: SlurmBed) -> Iterator[None]:
        yield
        reset(slurm_bed)
