"""Tune HPL: NB x grid x topology (x BLAS) within a time budget, every trial a stored ``hpl`` run.

Stages (each trial is a normal run in the store, tagged ``--tune-id=ID --tune-trial=KEY`` in its
command, so a rerun of the same tune skips what is already stored):

0. **dgemm against k = NB** (single core, C (m x m) += A (m x NB) B (NB x m), m ~ the local
   matrix size, through the same BLAS the ranks load): the rate of HPL's trailing update for each
   NB. NBs below :data:`NB_KEEP` x the best of their BLAS are pruned, and a BLAS whose best is
   below :data:`BLAS_KEEP` x the best BLAS. The OpenBLAS core type is part of the BLAS choice:
   ``openblas:auto`` (a better core type when OpenBLAS fell back below the CPU's ISA, see
   probe/blas.py) and ``openblas:none`` (the library's own choice) are both measured only when
   they differ, i.e. when auto applied a core type; the faster is kept for every later trial (auto
   is a rule, not a measurement: on a CPU where the rule is wrong the tuner must not follow it
   blindly; where they are the same kernels a second measurement would only add noise). An
   explicit ``--openblas-coretype`` is used as given. Two passes over
   the NBs (the second reversed), best of both, because a shared node only ever slows a sample. A quick ``peak`` run
   is stored when none exists for the core count, so each result has its % of the measured peak.
1. **short runs** at N_s ~ N/2 of every surviving (BLAS, NB, topology, grid, pmap), most
   promising (fastest dgemm) first.
2. **confirmation** at full N of the best :data:`TOP_K` by the model; the best measured wins.

Model (per configuration, from its one short run): HPL's time splits into the trailing update
(2/3 N^3 flops) and the rest (panel factorisation ~ N^2 NB, broadcast and swaps ~ N^2, the solve
~ N^2); the engine reports that split (the builtin engine's breakdown), so
``t(N) = t_update(N_s) (N/N_s)^3 + t_rest(N_s) (N/N_s)^2``. It ignores the update's dgemm getting
faster on larger blocks, so it underestimates; the first confirmed run gives the ratio measured /
model, and later predictions are scaled by it (both are reported). Without a breakdown (external
engines) the short run's rate is the prediction.

Budget: before each trial its wall time is estimated from what was measured (launch overhead
plus predicted kernel time); a trial that would not fit is not started and the report says so.
Stage 1 keeps room for one confirmation. A budget too small for stage 0 and one short run is a
UsageError before anything runs.

The package: :mod:`.space` (what is searched), :mod:`.model` (trials, the report record and the
time model), :mod:`.tuner` (the stages and the budget), :mod:`.report` (the text the CLI prints).
"""
from __future__ import annotations

from clusterbench.tuning.hpl.model import Trial, TuneReport, predict_rmax
from clusterbench.tuning.hpl.report import format_report, table_rows
from clusterbench.tuning.hpl.space import DEFAULT_BLAS, DEFAULT_NBS, TOPOLOGIES, Config, Space, grid_options
from clusterbench.tuning.hpl.tuner import parse_budget, tune

__all__ = ["Config", "Space", "Trial", "TuneReport", "tune", "parse_budget", "grid_options", "format_report",
           "table_rows", "predict_rmax", "DEFAULT_NBS", "DEFAULT_BLAS", "TOPOLOGIES"]
