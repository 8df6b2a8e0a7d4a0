"""Benchmarks of one node: memory, caches, FPU, peak, DGEMM."""
