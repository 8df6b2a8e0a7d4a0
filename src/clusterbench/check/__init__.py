"""``clusterbench check SUITE --baseline TAG``: a regression gate.

* :mod:`.suite` reads and validates a suite file (TOML; the standard ones in ``suites/``);
* :mod:`.runner` plans the check (everything refused before the first run), runs it, compares
  with the baseline through ``compare``'s analysis and moves the baseline tag when asked;
* :mod:`.baseline` decides which baseline runs concern the suite and whether they measured the
  same cluster;
* :mod:`.verdict` is the rule (pure): fail, cannot judge, pass, and the exit codes;
* :mod:`.junit`, :mod:`.perflog` and :mod:`.text` write the outcome for CI, for ReFrame-fed
  dashboards and for a person.
"""
