"""Topology in and out: Kubernetes, Kueue, AWS, Slurm and topoq's own files, read and written."""
