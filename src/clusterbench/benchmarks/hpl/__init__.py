"""HPL: the built-in engine, external engines (hpcc, xhpl) and node-count scaling."""
