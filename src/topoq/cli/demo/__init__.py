"""``topoq demo``: a real server, real pods and a scripted story (``command``, ``story``), or
with ``--offline`` the placement demo without a server (``offline``)."""

from topoq.cli.demo.command import DemoOptions, run_demo
from topoq.cli.demo.offline import run_offline_demo

__all__ = ["DemoOptions", "run_demo", "run_offline_demo"]
