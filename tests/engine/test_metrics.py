"""Prometheus metrics as the controller reports them."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from prometheus_client.parser import text_string_to_metric_families

from topoq.core.lifecycle import advance
from topoq.core.quota import QuotaBook
from topoq.domain.governance import TeamName
from topoq.domain.gpu_share import GPU_SHARE
from topoq.domain.job import JobId, JobPhase
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.engine.controller import Controller
from topoq.engine.metrics import ControlPlaneMetrics, JobTally
from topoq.engine.ports import ExecutorEventKind
from topoq.testing.builders import BLOCK
from topoq.testing.fakes import MemoryStore, ScriptedExecutor
from topoq.testing.governance import P5, gpu_cluster, job, policy, team


def samples(metrics: ControlPlaneMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_metrics_follow_admissions_borrowing_and_preemptions() -> None:
    nodes, spec = gpu_cluster([1, 2, 4])
    store, executor, metrics = MemoryStore(), ScriptedExecutor(), ControlPlaneMetrics()
    store.save_nodes(nodes, actor="t", now=0)
    store.save_policy(policy(team("a", 32), team("b", 32, borrow_gpus=32)), actor="t", now=0)
    c = Controller(store, executor, spec, clock=lambda: 1.0, metrics=metrics)
    c.intake.submit(job("b1", "b", 4).spec, actor="t")
    c.intake.submit(job("b2", "b", 4).spec, actor="t")
    c.step()
    for name in ("b1", "b2"):
        executor.report(ExecutorEventKind.STARTED, name)
    c.step()
    found = samples(metrics)
    assert found[("topoq_jobs", (("phase", "running"), ("team", "b")))] == 2
    assert found[("topoq_gpus", (("state", "running"), ("team", "b")))] == 64
    assert found[("topoq_quota_gpus", (("kind", "borrowed"), ("team", "b")))] == 32
    assert found[("topoq_quota_gpus", (("kind", "lent"), ("team", "a")))] == 32
    assert found[("topoq_admissions_total", (("team", "b"),))] == 2
    c.intake.submit(job("a1", "a", 4, required=BLOCK).spec, actor="t")
    c.step()
    found = samples(metrics)
    assert found[("topoq_preemptions_total", (("cause", "PREEMPTED_FOR_RECLAIM"),))] == 1
    assert found[("topoq_cycle_duration_seconds_count", ())] == 3
    assert found[("topoq_jobs", (("phase", "preempting"), ("team", "b")))] == 1
    assert found[("topoq_gpus", (("state", "stopping"), ("team", "b")))] == 32
    assert found[("topoq_gpus", (("state", "running"), ("team", "b")))] == 32
    assert found[("topoq_gpus", (("state", "pending"), ("team", "a")))] == 32
    spans = {k: v for k, v in found.items() if k[0] == "topoq_placement_span_domains_count"}
    assert spans[("topoq_placement_span_domains_count", (("level", BLOCK),))] == 2


def test_the_tally_kept_across_steps_matches_a_recount_as_jobs_move_and_finish() -> None:
    waiting = {view.id: view for view in (job("p1", "a", 2), job("p2", "b", 1, gpus=0))}
    tally = JobTally()
    tally.update(waiting)
    assert tally.gpu_milli[("b", "pending")] == 0 and tally.gpu_jobs[("b", "pending")] == 1
    admitted = advance(waiting[JobId("p1")], JobPhase.ADMITTED, now=1.0, cause="admitted")
    moved = {**waiting, admitted.id: admitted}
    tally.update(moved)
    assert tally.jobs[("a", JobPhase.ADMITTED)] == 1 and tally.jobs[("a", JobPhase.PENDING)] == 0
    assert tally.gpu_milli[("a", "running")] == 16_000 and tally.gpu_milli[("a", "pending")] == 0
    tally.update({admitted.id: admitted})  # p2 finished: no longer among the unfinished jobs
    assert tally.jobs[("b", JobPhase.PENDING)] == 0 and tally.gpu_jobs[("b", "pending")] == 0
    assert +tally.jobs == Counter({("a", JobPhase.ADMITTED): 1})


def test_quota_gpus_count_a_share_of_a_gpu_as_its_part_of_one() -> None:
    lender, borrower = team("a", 4, cohort=["org"]), team("b", 0, borrow_gpus=4, cohort=["org"])
    usage = {TeamName("b"): {P5: Resources({GPU_SHARE: 1500})}}  # three pods of 0.5 GPU
    book = QuotaBook(policy(lender, borrower), {P5: Resources({NVIDIA_GPU: 8})}, usage)
    metrics = ControlPlaneMetrics()
    metrics.observe_state({}, book)
    found = samples(metrics)
    assert found[("topoq_quota_gpus", (("kind", "borrowed"), ("team", "b")))] == 1.5
    assert found[("topoq_quota_gpus", (("kind", "lent"), ("team", "a")))] == 1.5
    assert found[("topoq_quota_gpus", (("kind", "guarantee"), ("team", "a")))] == 4


def test_gpu_gauges_count_pending_shares_of_a_gpu_as_their_part_of_one() -> None:
    halves = job("halves", "b", 3)
    shared = replace(halves.spec.workload.pod_sets[0], requests=Resources({GPU_SHARE: 500}))
    workload = replace(halves.spec.workload, pod_sets=(shared,))
    halves = replace(halves, spec=replace(halves.spec, workload=workload))
    jobs = {halves.id: halves, JobId("w"): job("w", "b", 1, gpus=2)}
    book = QuotaBook(policy(team("b", 8)), {P5: Resources({NVIDIA_GPU: 8})}, {})
    metrics = ControlPlaneMetrics()
    metrics.observe_state(jobs, book)
    assert metrics.tally.gpu_milli[("b", "pending")] == 3_500
    found = samples(metrics)
    assert found[("topoq_gpus", (("state", "pending"), ("team", "b")))] == 3.5


def test_steps_count_how_they_decided_and_arrivals_alike_take_no_cycle() -> None:
    """Team a at its limit: its queue head (two pods) waits; the first one-pod job is cycled
    and waits too; the ones after it, alike, arrive a step at a time and wait as it does
    without a cycle (``core.cycle.arrivals``); an end of work is cycled and admits them in
    their turns."""
    nodes, spec = gpu_cluster([1, 2, 4])
    store, executor, metrics = MemoryStore(), ScriptedExecutor(), ControlPlaneMetrics()
    store.save_nodes(nodes, actor="t", now=0)
    store.save_policy(policy(team("a", 32, borrow_gpus=0), team("b", 32)), actor="t", now=0)
    now = [1.0]
    c = Controller(store, executor, spec, clock=lambda: now[0], metrics=metrics)
    c.intake.submit(job("run", "a", 4).spec, actor="t")
    c.step()
    executor.report(ExecutorEventKind.STARTED, "run")
    c.step()
    decided = []
    for name, pods in [("head", 2), *((f"wait{i}", 1) for i in range(4))]:
        now[0] += 5
        c.intake.submit(job(name, "a", pods).spec, actor="t")
        decided.append(c.step().decided_by.value)
    assert decided == ["cycle", "cycle", "arrivals", "arrivals", "arrivals"]
    found = samples(metrics)
    assert found[("topoq_steps_total", (("decided_by", "arrivals"),))] == 3
    assert found[("topoq_steps_total", (("decided_by", "cycle"),))] >= 3
    cycled = {d.job: d for d in store.cycles[-4].diagnostics}["wait0"]
    stored = {d.job: d for d in store.cycles[-1].diagnostics}
    assert cycled.reason.value == "BORROW_LIMIT_REACHED"
    for later in ("wait1", "wait2", "wait3"):
        assert (stored[later].reason, stored[later].message) == (cycled.reason, cycled.message)
    executor.report(ExecutorEventKind.EXITED, "run")
    report = c.step()
    assert report.decided_by.value == "cycle"
    assert [a.job for a in report.result.admissions] == ["head", "wait0", "wait1"]
