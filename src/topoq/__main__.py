"""``python -m topoq`` runs the command line."""

from topoq.cli.app import main

main()
