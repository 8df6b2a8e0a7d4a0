"""clusterbench probe: what this machine is and its theoretical limits."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from clusterbench.errors import UsageError
from clusterbench.cli.options import json_option

NAME = "probe"
INTERRUPTED = "nothing was stored or written"


def add_parser(cmds: Any) -> None:
    pr = cmds.add_parser(NAME, help="what this machine is and its theoretical limits")
    json_option(pr, "print the probe as JSON")
    pr.add_argument("--sysfs-root", metavar="DIR", help="read a snapshot of another machine's /sys and /proc")
    hw = pr.add_mutually_exclusive_group()
    hw.add_argument("--hwloc", action="store_true", help="require hwloc (lstopo-no-graphics); fail if it is missing")
    hw.add_argument("--no-hwloc", action="store_true", help="read /sys and /proc directly even if hwloc is installed")


def handle(args: argparse.Namespace) -> int:
    from clusterbench.probe import probe
    from clusterbench.ui import format_probe, write_text

    if args.sysfs_root:
        if not os.path.isdir(args.sysfs_root):
            raise UsageError(f"--sysfs-root {args.sysfs_root} is not a directory", "give the directory holding sys/ and proc/")
    if args.hwloc:
        from clusterbench.errors import EnvironmentProblem
        from clusterbench.probe import hwloc

        if not hwloc.available():
            raise EnvironmentProblem("--hwloc was given but hwloc's lstopo-no-graphics is not installed",
                                     "apt-get install hwloc (or load an hwloc module), or drop --hwloc to read /sys")
    data = probe(sysfs_root=args.sysfs_root, use_hwloc=True if args.hwloc else (False if args.no_hwloc else None))
    if args.json:
        from clusterbench.ui import dump_json
        dump_json(data)
    else:
        write_text(format_probe(data))
        if hasattr(os, "geteuid") and os.geteuid() == 0 and not _root_consent_given():
            from clusterbench import config  # say once, up front, how root consent is given

            sys.stdout.write(f"running as root: MPI benchmarks need --allow-root; {config.permanent_root_hint()}\n")
    return 0


def _root_consent_given() -> bool:
    """Whether standing consent to run MPI as root is already set (then there is nothing to say);
    a malformed config file is not consent (the commands that need it say what is wrong)."""
    from clusterbench import config

    try:
        return config.allow_run_as_root()
    except UsageError:
        return False
