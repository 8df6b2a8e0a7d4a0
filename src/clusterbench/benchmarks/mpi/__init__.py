"""MPI benchmarks of the interconnect: ping-pong, bandwidth, pairs, ring, placement."""
