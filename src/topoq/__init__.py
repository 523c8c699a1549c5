"""topoq: a topology-aware gang scheduler and governance control plane for shared GPU clusters."""

__version__ = "0.1.0"
