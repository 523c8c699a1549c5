"""Executors that run placed gangs: local processes (default), later Slurm, Ray, Kubernetes."""
