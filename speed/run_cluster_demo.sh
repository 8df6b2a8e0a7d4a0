#!/usr/bin/env bash
# The README's "Running on your cluster" flow on four virtual machines (as root): up, install, preflight,
# run cluster --budget 8m, the runs of its tag, the report, down. Output: the raw log the README quotes.
mkdir -p "${OUT:-/tmp/cb-demo}" && cd "${OUT:-/tmp/cb-demo}"
set -x
export CLUSTERBENCH_SIM_PREFIX=rcq- CLUSTERBENCH_SIM_STATE=${OUT:-/tmp/cb-demo}/sim CLUSTERBENCH_ALLOW_RUN_AS_ROOT=1
CB=${CB:-clusterbench}
DB="--db ${OUT:-/tmp/cb-demo}/r.db"
$CB sim-cluster up --machines --nodes 4
$CB sim-cluster hosts | grep slots > nodes
cat nodes
time $CB $DB cluster install --hostfile nodes
time $CB $DB cluster preflight --hostfile nodes --allow-root
time $CB $DB run cluster --hostfile nodes --budget 8m --oversubscribe --tag first
echo rc=$?
$CB $DB results list --tag first
$CB $DB report first -o ${OUT:-/tmp/cb-demo}/report --force | tail -3
$CB sim-cluster down --force
