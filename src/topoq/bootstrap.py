"""``python -m topoq.bootstrap``: ``topoq server`` without the CLI's start-up (what the demo,
the tests and service units run). The server is the ``topoq.server`` package."""

from topoq.server.run import main

if __name__ == "__main__":
    main()
