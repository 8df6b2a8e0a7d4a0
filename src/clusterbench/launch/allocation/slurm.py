"""Slurm: inside a job when ``$SLURM_JOB_ID`` and its node list are set; the node list
(``n[1-3,05],gpu01``) expanded by ``scontrol show hostnames``, or by :func:`expand_nodelist` where
scontrol is missing or fails (a login node without Slurm's tools in PATH). ``srun`` starts one task
per node inside it."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping

from clusterbench.errors import EnvironmentProblem
from clusterbench import process
from clusterbench.launch.allocation import Allocation, register_allocation


def expand_nodelist(text: str) -> list[str]:
    """A Slurm node list (``n[1-3,05],gpu01``) as names, without Slurm."""
    out: list[str] = []
    for m in re.finditer(r"([^,\[]+)(?:\[([^\]]+)\])?([^,]*)", text):
        head, ranges, tail = m.group(1), m.group(2), m.group(3)
        if not head and not ranges:
            continue
        if not ranges:
            out.append(head + tail)
            continue
        for part in ranges.split(","):
            a, _, b = part.partition("-")
            if b:
                width = len(a)
                out += [f"{head}{i:0{width}d}{tail}" for i in range(int(a), int(b) + 1)]
            else:
                out.append(f"{head}{a}{tail}")
    return out


def _scontrol(nodelist: str, env: Mapping[str, str]) -> list[str] | None:
    exe = shutil.which("scontrol", path=env.get("PATH", os.defpath))
    if exe is None:
        return None
    try:
        # bounded: without a slurm.conf scontrol looks for one in DNS (SRV records), 20 s where none answers
        p = process.run([exe, "show", "hostnames", nodelist], timeout=5, env=dict(env))
    except (OSError, subprocess.SubprocessError):
        return None
    names = [ln.strip() for ln in p.stdout.splitlines() if ln.strip()]
    return names if p.returncode == 0 and names else None


def job_cpus(env: Mapping[str, str], hosts: list[str]) -> dict[str, int] | None:
    """How many cpus the job holds on each of ``hosts`` (the job's nodes, in its order), from
    ``$SLURM_JOB_CPUS_PER_NODE`` (``2(x3),1``), or None where it is unset or does not fit them."""
    text = env.get("SLURM_JOB_CPUS_PER_NODE") or ""
    counts: list[int] = []
    for part in filter(None, text.split(",")):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            return None
        counts += [int(m[1])] * int(m[2] or 1)
    return dict(zip(hosts, counts)) if counts and len(counts) == len(hosts) else None


def inside(env: Mapping[str, str]) -> bool:
    """Inside a Slurm job: its id is set (salloc, sbatch, srun all set it)."""
    return bool(env.get("SLURM_JOB_ID"))


@register_allocation("slurm", inside=inside, launcher="srun")
def detect(env: Mapping[str, str]) -> Allocation | None:
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job or not nodelist:
        return None
    names = _scontrol(nodelist, env)
    if names is None:
        try:
            names = expand_nodelist(nodelist)
        except ValueError:
            names = []
    if not names:
        raise EnvironmentProblem(f"inside Slurm job {job}, its node list {nodelist!r} cannot be read "
                                 "(scontrol show hostnames failed)", "give the nodes with --hosts or --hostfile")
    return Allocation("slurm", job, tuple(dict.fromkeys(names)), "srun")
