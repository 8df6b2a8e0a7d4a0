"""HPCG: the conjugate-gradient benchmark with a multigrid preconditioner (issue 9)."""
