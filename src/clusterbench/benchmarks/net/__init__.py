"""Network benchmarks below MPI (TCP)."""
