"""The finished jobs that pending jobs depend on, for a snapshot of unfinished jobs.

The store hands the controller (and ``explain``'s read-only cycle) only unfinished jobs, so a
dependency on a job that has ended would look like one on no job at all. ``upstream_phases``
reads, in one store query, the phase of every job a pending job depends on that is not among
the jobs read; ``Snapshot.upstream_phases`` carries it into the cycle. Jobs are never deleted,
and each job's upstream jobs were stored before it (submission checks that they exist), so an
id the store does not know is one that never existed: such a dependency cancels its job.
"""

from __future__ import annotations

from collections.abc import Collection

from topoq.core.dependencies import absent_upstream
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.engine.ports import Store


def upstream_phases(
    store: Store, jobs: Collection[JobView], dependents: Collection[JobView] | None = None
) -> dict[JobId, JobPhase]:
    """The phase of each job that a pending job among ``jobs`` depends on and that is not
    among ``jobs``; no query when there is none. ``dependents``: the pending jobs of ``jobs``
    that depend on others, when the caller sorted them out already."""
    wanted = absent_upstream(jobs, dependents)
    return store.phases_of(wanted) if wanted else {}
