"""Whole-cluster sweeps: every node at once (``node``), every pair of nodes (``network``).

Each sweep is one launcher job (mpirun across the hosts, or srun inside a Slurm allocation) whose
output is gathered by the caller; outliers are judged by ``analysis.outliers``.
"""
