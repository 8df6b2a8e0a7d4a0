"""Tune an MPI collective: the MPI's own algorithms per message size (``tune coll``).

* :mod:`.algorithms`: what the MPI offers for the op (Open MPI's ``coll_tuned`` enumerators from
  ``ompi_info``, MPICH's ``MPIR_CVAR_<OP>_INTRA_ALGORITHM`` values from ``mpivars``) and how one is
  forced (the environment; the benchmark records it as ``params.algorithm``).
* :mod:`.search` (pure): interleaved rounds of the default and every candidate, judged per size
  with ``compare``'s statistics until they tell the best from the default or the budget ends;
  the winners per size range; the verification of the tuned configuration against the default.
* :mod:`.rules`: Open MPI's dynamic rules file (``coll_tuned_dynamic_rules_filename``, 4.1's
  classic format) and MPICH's environment file of CVARs.
* :mod:`.mpich_tree`: MPICH's per-size JSON selection file (``MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE``),
  the default tree compiled into the library with the tuned op's intra branch replaced.
* :mod:`.tuner`: the search on the collectives benchmark (every launch a stored run, tagged
  ``--tune-id=ID --tune-trial=N/LABEL`` in its command as ``tune hpl`` tags its trials), the file
  written only where the verification found the tuned configuration significantly better.
  Open MPI's verification runs the rules file itself (the file the user gets, minus the sizes it
  drops); MPICH's likewise runs the selection file. Where MPICH's file cannot be built (an op
  MPICH compares no size for, a library without the default tree) its CVAR holds for every size, so
  the one algorithm that won the most sizes is verified at every size and kept only when it is
  nowhere significantly slower.
* :mod:`.report`: the text the CLI prints.
"""
from __future__ import annotations

from clusterbench.tuning.coll.algorithms import Algorithm, enumerate_algorithms, parse_mpivars, parse_ompi_info
from clusterbench.tuning.coll.report import format_report
from clusterbench.tuning.coll.rules import MsgRule, format_ompi_rules, parse_ompi_rules
from clusterbench.tuning.coll.tuner import CollTuneReport, tune

__all__ = ["Algorithm", "CollTuneReport", "MsgRule", "enumerate_algorithms", "format_ompi_rules", "format_report",
           "parse_mpivars", "parse_ompi_info", "parse_ompi_rules", "tune"]
