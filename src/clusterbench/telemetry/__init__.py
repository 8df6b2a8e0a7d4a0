"""What a board tells about itself while clusterbench measures it: a Raspberry Pi's ``vcgencmd``.

* :mod:`.vcgencmd` - the parsers (pure): ``get_throttled`` (every bit, now and since boot),
  ``measure_temp``, ``measure_clock arm`` and a Pi 5's ``pmic_read_adc`` (each rail's current and
  voltage, rail names as printed);
* :mod:`.board` - reading them on this machine (bounded), and the snippet a node of a cluster runs;
* :mod:`.verdict` - a run's readings judged (pure): which node throttled or was under-voltage during
  the run, the warning its figures carry, the note kept with the run;
* :mod:`.watch` - what a session asks: ``get_throttled`` on every node before and after the run,
  ``measure_temp`` and ``measure_clock arm`` (and ``get_throttled``) sampled while it runs.

A machine without ``vcgencmd`` (not a Raspberry Pi) costs nothing and shows nothing.
The PMIC as a power source is ``--power pmic`` (:mod:`clusterbench.energy.pmic`); the since-boot
bits are a doctor rule (``pi-throttled``).
"""
