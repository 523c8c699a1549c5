"""The demo's story: five numbered scenes on the demo cluster (2 spines × 4 blocks × 8 nodes ×
8 GPUs) under the demo policy (nlp and vision guaranteed 192 GPUs each, speech 128), played
against a real server with real pods. Each scene says what it shows in one line, acts through
the API, waits for the scheduler by polling, and prints the evidence: the job table, the
explanation of a waiting job, the phase change that records a preemption or a requeue."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from topoq.cli.demo.jobs import BLOCK, SPINE, DemoJob, block_job
from topoq.cli.demo.stage import Stage, block_of
from topoq.client import ClientError
from topoq.wire.v1 import PhaseChangeModel

NLP_TRAINING = ("nlp-train-1", "nlp-train-2", "nlp-train-3")
NLP_EXPERIMENTS = ("nlp-exp-1", "nlp-exp-2", "nlp-exp-3")
NLP_JOBS = NLP_TRAINING + NLP_EXPERIMENTS
SMALL_JOBS = ("nlp-eval-1", "nlp-eval-2", "nlp-eval-3", "nlp-eval-4")
GANG = "vision-pretrain"
LEVELS = (SPINE, BLOCK)
RECLAIM = "PREEMPTED_FOR_RECLAIM"
PRIORITY = "PREEMPTED_FOR_PRIORITY"


@dataclass
class StoryState:
    """What a scene leaves for the next one."""

    gang_block: str | None = None
    gang_nodes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Scene:
    title: str
    summary: str
    play: Callable[[Stage, StoryState], None]


# --- scene 1 ------------------------------------------------------------------------------
def borrowing(stage: Stage, state: StoryState) -> None:
    filler_s = stage.pace.filler_s
    stage.note("speech starts a 16-node training job, inside its 128-GPU guarantee.")
    stage.submit(DemoJob("speech-asr", "speech", "training", pods=16, sleep_s=filler_s))
    stage.expect("speech-asr to run", lambda: stage.running("speech-asr"))
    stage.note("nlp (guaranteed 192 GPUs) submits six 8-node jobs, 384 GPUs; vision is idle.")
    for name in NLP_TRAINING:
        stage.submit(block_job(name, "nlp", "training", filler_s))
    for name in NLP_EXPERIMENTS:
        stage.submit(block_job(name, "nlp", "experiment", filler_s))
    stage.expect("all six nlp jobs to run", lambda: stage.running(*NLP_JOBS))
    stage.show_jobs(("speech-asr", *NLP_JOBS))
    stage.show_teams()
    used, borrowed, _ = stage.team_gpus("nlp")
    if borrowed > 0:
        stage.evidence(
            f"nlp uses {used} GPUs: its 192 and {borrowed} borrowed from what vision leaves "
            "unused; all 512 GPUs are busy"
        )
    else:
        stage.miss(f"expected nlp to borrow GPUs, but it uses {used} and borrows none")


# --- scene 2 ------------------------------------------------------------------------------
def reclaim(stage: Stage, state: StoryState) -> None:
    stage.note("vision submits an 8-node job: inside its guarantee, but no GPU is free.")
    stage.submit(block_job("vision-train", "vision", "training", stage.pace.filler_s))
    victim = await_preemption(stage, NLP_EXPERIMENTS + NLP_TRAINING, RECLAIM)
    stage.expect("vision-train to run", lambda: stage.running("vision-train"))
    stage.note(f"{victim} goes back to the queue; nlp may not borrow what vision now uses:")
    stage.expect(f"{victim} to wait", lambda: stage.reason(victim) is not None)
    stage.show_explain(victim)
    stage.show_jobs(("vision-train", *NLP_JOBS))
    stage.show_teams()


def await_preemption(stage: Stage, candidates: tuple[str, ...], cause: str) -> str:
    """The candidate preempted with ``cause`` (its phase change printed), once it happens."""
    found: list[str] = []

    def preempted() -> bool:
        victim = stage.first_with_cause(candidates, cause)
        if victim is not None:
            found.append(victim)
        return victim is not None

    stage.expect(f"a job to be preempted with {cause}", preempted)
    change = stage.change_caused(found[0], cause)
    if change is not None:
        stage.show_change(found[0], change)
    return found[0]


# --- scene 3 ------------------------------------------------------------------------------
def priority(stage: Stage, state: StoryState) -> None:
    stage.note(
        "nlp submits an 8-node inference job. nlp cannot borrow more (vision lends only what "
        "it does not use), so nlp's own lower-priority work makes room."
    )
    serve = DemoJob("nlp-serve", "nlp", "inference", pods=8, sleep_s=stage.pace.filler_s)
    stage.submit(serve)
    await_preemption(stage, NLP_EXPERIMENTS + NLP_TRAINING, PRIORITY)
    stage.expect("nlp-serve to run", lambda: stage.running("nlp-serve"))
    stage.show_jobs(("nlp-serve", *NLP_JOBS))
    stage.note("speech and vision keep their work: in-team preemption stays in the team.")


# --- scene 4 ------------------------------------------------------------------------------
def block_gang(stage: Stage, state: StoryState) -> None:
    quiet_cluster(stage)
    pace = stage.pace
    stage.note("speech runs 8 inference replicas, at most one per block, for availability:")
    spread: dict[str, object] = {"spread": {"level": BLOCK, "maxPodsPerDomain": 1}}
    stage.submit(DemoJob("speech-serve", "speech", "inference", 8, pace.serving_s, spread))
    stage.expect("speech-serve to run", lambda: stage.running("speech-serve"))
    stage.note("vision submits a gang that must run inside one block (8 nodes):")
    stage.submit(block_job(GANG, "vision", "training", pace.gang_s, required=True))
    stage.expect(
        f"{GANG} to wait for a block", lambda: stage.reason(GANG) == "TOPOLOGY_UNSATISFIABLE"
    )
    stage.show_explain(GANG)
    state.gang_block = str(stage.client.explain(GANG).numbers.get("reserved_domain", ""))
    backfill(stage, state.gang_block)
    stage.note(
        f"speech-serve ends after {pace.serving_s:g} s; the held block is then whole "
        f"(meanwhile, try `topoq explain {GANG}`)."
    )
    stage.expect(f"{GANG} to start", lambda: stage.running(GANG), pace.serving_s + pace.deadline_s)
    record_gang(stage, state)
    stage.show_jobs(("speech-serve", GANG, *SMALL_JOBS))


def quiet_cluster(stage: Stage) -> None:
    stage.note("Intermission: the teams cancel the rest of their work; the cluster empties.")
    cancelled = 0
    for row in stage.client.jobs(limit=500).items:
        if not row.phase.finished:
            try:
                stage.client.cancel(row.id)
                cancelled += 1
            except ClientError:
                pass  # it ended on its own meanwhile; the wait below checks the GPUs
    stage.expect("every GPU to be free", lambda: stage.client.topology().gpus_used == 0)
    stage.note(f"cancelled {cancelled} jobs; all 512 GPUs are free")


def backfill(stage: Stage, held: str | None) -> None:
    """Small jobs arrive while the gang waits: they start in other blocks, never the held one."""
    stage.note("Meanwhile small 1-node nlp jobs arrive; they backfill around the held block:")
    for name in SMALL_JOBS:
        stage.submit(DemoJob(name, "nlp", "experiment", pods=1, sleep_s=stage.pace.small_s))
    stage.expect(
        "the small jobs to start", lambda: all(started(stage, name) for name in SMALL_JOBS)
    )
    for name in SMALL_JOBS:
        where = where_it_ran(stage, name)
        said = "its pod says so" if stage.pods_print else "its placement says so"
        stage.evidence(f"{name} ran in {where or 'an unknown block'} ({said})")
        if held and where == held:
            stage.miss(f"{name} ran in {held}, the block held for {GANG}")


def started(stage: Stage, job: str) -> bool:
    return stage.client.job(job).started_at is not None and bool(where_it_ran(stage, job))


def where_it_ran(stage: Stage, job: str) -> str | None:
    """``l1-01/l2-01-02``, from the line `topology …` its first pod printed (or, where pods'
    output is not read through topoq, from its placement)."""
    if not stage.pods_print:
        return block_of(stage.client.job(job), LEVELS)
    for line in stage.client.logs(job, 0).text.splitlines():
        if line.startswith("topology "):
            pairs = (part.partition("=") for part in line.removeprefix("topology ").split(", "))
            labels = {label: value for label, _, value in pairs}
            if all(level in labels for level in LEVELS):
                return "/".join(labels[level] for level in LEVELS)
    return None


def record_gang(stage: Stage, state: StoryState) -> None:
    gang = stage.client.job(GANG)
    block = block_of(gang, LEVELS)
    state.gang_nodes = list(gang.allocation.nodes) if gang.allocation else []
    nodes = f"{state.gang_nodes[0]}…{state.gang_nodes[-1]}" if state.gang_nodes else "?"
    before = state.gang_block
    if before and block == before:
        how = " — the block that was held for it"
    elif before and block:
        how = f" — no longer in {before}"
    else:
        how = ""
    stage.evidence(f"{GANG} runs as one gang in {block} ({nodes}){how}")
    if block is None:
        stage.miss(f"expected {GANG} inside one block, but it spans several")
    state.gang_block = block


# --- scene 5 ------------------------------------------------------------------------------
def node_failure(stage: Stage, state: StoryState) -> None:
    if len(state.gang_nodes) < 3 or stage.phase(GANG) != "running":
        stage.miss(f"{GANG} is not running, so there is no gang whose node could fail")
        return
    node = state.gang_nodes[2]
    stage.note(f"{node}, a node of {GANG}, fails (`topoq node fail {node}` does the same):")
    stage.client.node_action(node, "fail")
    stage.evidence(f"{node}: failed — its pods are stopped")
    try:
        stage.expect(
            f"{GANG} to be requeued and restart on other nodes", lambda: moved_off(stage, node)
        )
        requeue = latest_requeue(stage, GANG)
        if requeue is not None:
            stage.show_change(GANG, requeue)
        record_gang(stage, state)
        show_first_pod(stage, GANG)
    finally:
        recovered = stage.client.node_action(node, "recover").node
        stage.evidence(f"{node}: {'ready again' if recovered.ready else 'still failed'}")
    stage.note(
        f"{GANG} runs its {stage.pace.gang_s:g} s again from the start "
        f"(try `topoq logs {GANG} --follow`)."
    )
    stage.expect(
        f"{GANG} to finish",
        lambda: stage.phase(GANG) == "succeeded",
        stage.pace.gang_s + stage.pace.deadline_s,
    )
    stage.show_jobs((GANG,))


def moved_off(stage: Stage, node: str) -> bool:
    gang = stage.client.job(GANG)
    on = gang.allocation.nodes if gang.allocation else [node]
    return gang.phase.value == "running" and node not in on


def latest_requeue(stage: Stage, job: str) -> PhaseChangeModel | None:
    history = stage.client.history(job).history
    return next(
        (c for c in reversed(history) if c.phase.value == "pending" and "requeued" in c.cause),
        None,
    )


def show_first_pod(stage: Stage, job: str) -> None:
    """The lines of the first pod's output that say where the new attempt runs (or, where
    pods' output is not read through topoq, the nodes it is placed on)."""
    if not stage.pods_print:
        found = stage.client.job(job)
        nodes = ", ".join(found.allocation.nodes) if found.allocation else "?"
        stage.say(f"      its pods: {nodes} (kubectl get pods -o wide shows them there)")
        return
    try:
        text = stage.client.logs(job, 0).text
    except ClientError as error:
        stage.note(f"(no logs yet: {error})")
        return
    for line in text.splitlines():
        if line.startswith(("job ", "rank ", "topology ")):
            stage.say(f"      pod 0: {line}")


SCENES = (
    Scene(
        "Borrowing",
        "A team runs beyond its guarantee on GPUs another team leaves idle.",
        borrowing,
    ),
    Scene(
        "Reclaim",
        "The lender wants its GPUs back: the borrower's work is preempted for it.",
        reclaim,
    ),
    Scene(
        "Priority inside a team",
        "A team's inference job preempts the team's own lower-priority experiment.",
        priority,
    ),
    Scene(
        "A gang waits for a block",
        "A topology-constrained gang waits, its block held, until one block has room for all.",
        block_gang,
    ),
    Scene(
        "Node failure",
        "A node of a running gang fails: the gang is requeued and restarts elsewhere.",
        node_failure,
    ),
)
