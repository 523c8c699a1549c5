"""``topoq simulate``'s run of a scenario: the real controller a ``topoq server`` runs, on a
virtual clock (``sim.controlled``; issue 14 §1, "one shell around the core").

A :class:`Simulation` drives the controller through its ports: an in-memory store that tells
each read what changed, the simulated executor (``sim.executor``: a gang starts at once and
ends when its work is done, paced by the communication cost model when there is one; a victim
stops after the scenario's stop delay; a failed node loses its gangs) and a virtual clock. The
scenario's events go in as a user's would (submissions, cancels, holds and releases through the
controller's intake; failed and recovered nodes marked as ``topoq nodes`` marks them). At each
instant — a scenario event, an executor report, a time rule coming due, a step on the
scenario's ``cycle_interval_s`` while jobs wait — the controller steps until a step changes
nothing more there. The decision log is written from what the steps stored, so what a run
reports is what a server would have done. The run ends at ``until_s``, or when nothing is left
to come: jobs still pending then are reported with their last diagnostic.
"""

from __future__ import annotations

from pathlib import Path

from topoq.core.cycle import PlacementMode
from topoq.core.fair_share import TeamUsage
from topoq.domain.governance import TeamName
from topoq.sim.controlled import ScenarioRun
from topoq.sim.log import DecisionLog
from topoq.sim.network import NetworkModel
from topoq.sim.result import (
    PROGRESS_EVERY_CYCLES,
    LeftPending,
    Progress,
    SimulationResult,
    simulation_result,
)
from topoq.sim.scenario import Scenario, load_scenario

__all__ = [
    "PROGRESS_EVERY_CYCLES",
    "LeftPending",
    "Progress",
    "Simulation",
    "SimulationResult",
    "run_scenario",
    "simulation_result",
]


def run_scenario(path: Path | str) -> SimulationResult:
    """Read the scenario file and simulate it."""
    return Simulation(load_scenario(path)).run()


class Simulation:
    """One run of a scenario; ``run()`` once."""

    def __init__(
        self,
        scenario: Scenario,
        network: NetworkModel | None = None,
        placement: PlacementMode = PlacementMode.TOPOQ,
    ) -> None:
        self.scenario = scenario
        self.network = network
        """The communication cost model (None: a job runs for its run time wherever it
        lands)."""
        self.placement = placement
        """How the controller's cycles place gangs: topoq's way, or a baseline's."""
        self.log = DecisionLog()
        self.cycles = 0
        self.fair_share_usage: dict[TeamName, TeamUsage] = {}
        """Each team's decayed fair-share usage as the run ended (``core.fair_share``)."""

    def run(self, progress: Progress | None = None) -> SimulationResult:
        """The whole run; ``progress(simulated_s, cycles)`` is told every
        ``PROGRESS_EVERY_CYCLES`` cycles (a long replay's progress bar)."""
        driver = ScenarioRun(self.scenario, self.log, self.placement, self.network)
        driver.run(progress)
        self.cycles = driver.cycles
        self.fair_share_usage = driver.fair_share_usage()
        return driver.result()
