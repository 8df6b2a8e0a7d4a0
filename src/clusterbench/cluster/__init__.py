"""A cluster of separate machines: install clusterbench on every node, check it can run MPI."""
