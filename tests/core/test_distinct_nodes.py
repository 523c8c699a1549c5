"""``ledger.distinct`` is ``np.unique`` without its import of ``numpy.ma``: the same values,
and a cycle that derives its ledger from the last one imports nothing more."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from topoq.core.ledger import distinct


@given(st.lists(st.integers(0, 50), max_size=40))
def test_distinct_is_numpy_s_unique(values: list[int]) -> None:
    array = np.asarray(values, dtype=np.int64)
    assert distinct(array).tolist() == np.unique(array).tolist()


CYCLES = """
import sys
from topoq.core.cycle import Snapshot, schedule_with_parking
from topoq.core.lifecycle import advance, apply_cycle
from topoq.domain.job import JobPhase
from topoq.testing.governance import Cluster, job, policy, team

c = Cluster.of([2, 2, 4], policy(team("a", 128)))
c.submit(*(job(f"j{i}", "a", 2) for i in range(10)))
result, parking = schedule_with_parking(c.snapshot())
c.jobs = apply_cycle(c.jobs, result, now=0.0, start_at_once=True)
running = sorted(j for j, v in c.jobs.items() if v.phase is JobPhase.RUNNING)
c.jobs[running[0]] = advance(c.jobs[running[0]], JobPhase.SUCCEEDED, now=1.0, cause="exited")
c.now = 1.0
result, parking = schedule_with_parking(c.snapshot(), parking)
assert result.admissions, "the second cycle derived its ledger and admitted"
print("numpy.ma" in sys.modules)
"""


def test_a_cycle_derived_from_the_last_imports_no_masked_arrays() -> None:
    ran = subprocess.run(
        [sys.executable, "-c", CYCLES], capture_output=True, text=True, check=True, timeout=120
    )
    assert ran.stdout.strip() == "False", ran.stderr
