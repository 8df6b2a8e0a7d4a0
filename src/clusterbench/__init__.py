"""clusterbench: characterise, tune and compare HPC clusters.

The public Python API mirrors the command line:

    from clusterbench.probe import probe
    from clusterbench.benchmarks import get_benchmark, run_benchmarks
"""
__version__ = "0.1.0"

#: Version of the ``--json`` document and of the results store schema.
#: Bump on any incompatible change; documented in README.md ("JSON output").
SCHEMA_VERSION = 1
