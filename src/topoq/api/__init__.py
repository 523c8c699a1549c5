"""The REST API (FastAPI) under ``/api/v1``: jobs, teams, policy, nodes, topology, events and
audit, behind bearer tokens with roles. ``create_app(service)`` builds it; ``topoq.bootstrap``
wires the store, executor and controller loop and serves it."""
