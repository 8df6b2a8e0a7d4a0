"""Energy: what the nodes of a run draw while it measures, and the figures made from it.

The one place for energy measurement (``--power SPEC``, ``--watts W``, ``--power-interval S``):

* :mod:`.spec` - the ``--power`` specs and their checks (one-line errors, before anything runs);
* the meter kinds, one module each: :mod:`.rapl` (powercap counters), :mod:`.ipmi` (the BMC), :mod:`.pmic`
  (a Raspberry Pi 5's PMIC rails),
  :mod:`.command` (``cmd:COMMAND``), :mod:`.csvlog` (``csv:FILE``), :mod:`.declared` (``watts:W``), on
  the common :mod:`.source` (samples, and the energy over an interval from them);
* :mod:`.build` - the run's meter from the specs (which node gets which source) and the kinds'
  registry; :mod:`.meter` - the sampling threads and the energy of every node over an interval;
* :mod:`.phase` - a benchmark's timed phase, and the figures that wait for its energy (Gflops/W);
* :mod:`.run` - what a session asks of it (the meter, checked; the run record's ``energy``);
* :mod:`.figures` - the arithmetic (pure: no I/O): joules, average power, Gflops/W, why a figure is
  missing; :mod:`.text` - what ``run`` prints about energy (pure).
"""
