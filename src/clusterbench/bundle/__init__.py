"""The result bundle: one versioned JSON document per run (or per tag) that anyone can read, check
and re-run, and that ``results import`` puts back into a store as it was.

* :mod:`.document` - the document made from stored runs (:func:`build`), its text (:func:`dumps`,
  the same bytes for the same runs) and its checksum;
* :mod:`.checker` - reading one back (:func:`loads`): invalid JSON, a bundle of a newer schema, one that
  does not follow ``schema.json`` (the JSON Schema kept beside this module, checked by a small checker
  of its own: ``jsonschema`` is not a dependency of clusterbench) and a wrong checksum are refused
  with one line each;
* :mod:`.importing` - into a store, all or nothing (:func:`import_bundle`).

What a bundle holds, per run: the run record (``Run.as_json``: command, argv, host, versions, every
node's probe and NIC settings, builds, warnings, notes, tags, note, the energy record), ``nodes`` (every
node's probe by name), ``software`` (per node: kernel, MPI, BLAS, compilers, clusterbench and the
builds), every figure (``Result.as_json``: parameters, raw samples, summary, limits, warnings) with its
``intervals`` (99% intervals of the mean and of the median), the ``power_trace`` and the ``energy_level``
the measurement satisfies (:mod:`clusterbench.energy.levels`). ``imported`` lists the times the run was
imported (in the store: a note of the run); it is the one part the checksum leaves out, so an export of
an imported run differs from the original's only there.
"""
from __future__ import annotations

from clusterbench.bundle.checker import loads, read_file
from clusterbench.bundle.document import BUNDLE_SCHEMA, KIND, build, checksum, dumps, runs_of

__all__ = ["BUNDLE_SCHEMA", "KIND", "build", "checksum", "dumps", "loads", "read_file", "runs_of"]
