"""Scenario simulation: the same core, a virtual clock and a simulated executor.

``run_scenario(path)`` reads a scenario file (:mod:`topoq.sim.scenario`), runs it
(:mod:`topoq.sim.engine`) and returns the decision log (:mod:`topoq.sim.log`) and the summary
per team (:mod:`topoq.sim.summary`).
"""

from __future__ import annotations

from topoq.sim.engine import LeftPending, Simulation, SimulationResult, run_scenario
from topoq.sim.log import Decision, LogEntry, json_lines
from topoq.sim.scenario import Scenario, load_scenario
from topoq.sim.summary import Summary, TeamSummary, WaitStats, summarize

__all__ = [
    "Decision",
    "LeftPending",
    "LogEntry",
    "Scenario",
    "Simulation",
    "SimulationResult",
    "Summary",
    "TeamSummary",
    "WaitStats",
    "json_lines",
    "load_scenario",
    "run_scenario",
    "summarize",
]
