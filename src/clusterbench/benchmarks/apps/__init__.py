"""Application benchmarks: whole workloads whose speed depends on the machine in ways the
micro-benchmarks do not predict (pdes: a Time Warp simulation, latency bound and irregular)."""
