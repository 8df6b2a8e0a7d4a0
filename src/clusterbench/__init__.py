"""clusterbench: characterise, tune and compare HPC clusters.

The public Python API mirrors the command line:

    from clusterbench.probe import probe               # clusterbench probe
    from clusterbench.session import run               # clusterbench run BENCH
    from clusterbench.store import Store               # clusterbench results ...
    report = run(["stream"], {"stream": {"threads": 2}}, profile="quick")
    report.document()                                  # the --json document
"""
__version__ = "0.2.0"

#: Version of the ``--json`` document (the results store has its own, ``store.STORE_SCHEMA``).
#: Bump on any incompatible change; documented in README.md ("JSON output").
SCHEMA_VERSION = 1
