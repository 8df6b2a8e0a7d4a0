"""HPC Challenge benchmarks beyond HPL/DGEMM/STREAM: PTRANS, RandomAccess, FFT (issue 9)."""
