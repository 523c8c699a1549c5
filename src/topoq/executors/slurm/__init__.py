"""The Slurm executor (``topoq server --executor slurm --slurm-conf FILE``): each admitted gang
is one Slurm job pinned to exactly its placed nodes, in a partition topoq owns; nodes come from
``sinfo``, switches from topology.conf or a topoq cluster file, which ``--write-topology``
keeps topology.conf in step with (docs/executors.md, ADR 0011). Its plugin record is in
``topoq.executors.registry``, its factory and capabilities in ``plugin``."""
