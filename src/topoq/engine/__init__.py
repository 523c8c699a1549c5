"""The imperative shell: intake, the cycle loop, dispatch to an executor, reconciliation."""
