"""Tuners: searches over a benchmark's parameters that measure, model and prune (``tuning.hpl``)."""
