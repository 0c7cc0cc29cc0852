#!/bin/sh
# Slurm prolog for fabricd's job-aware routing: maps the job to the end ports of its hosts
# (`fabricctl jobs set JOB_ID GUID...`), so the next generation routes the job's traffic
# balanced (`[routing] job_aware = true`). Install as slurm.conf `PrologSlurmctld=` (runs once
# per job on the controller; `Prolog=` would run it on every node of the job).
#
# Input (set by Slurm): SLURM_JOB_ID, SLURM_JOB_NODELIST (a hostlist, e.g. node[001-004]).
# Optional: FABRICD_SOCKET (default /run/fabricd/fabricd.sock; also http(s)://host:port),
#           FABRICCTL (default: fabricctl from PATH), FABRICD_TIMEOUT (seconds, default 10).
# Hosts are matched to end ports by node description (`node017 HCA-1` is host node017), the
# names `fabricctl export slurm` writes.
#
# It fails soft: whatever goes wrong (fabricd down or unreachable, unknown hosts, a timeout),
# it logs to syslog (tag fabricd-slurm) and stderr and exits 0, so Slurm neither drains nodes
# nor requeues the job because of the fabric manager: the job runs with the routing in force.
FABRICCTL=${FABRICCTL:-fabricctl}
SOCKET=${FABRICD_SOCKET:-/run/fabricd/fabricd.sock}
TIMEOUT=${FABRICD_TIMEOUT:-10}

log() {
    logger -t fabricd-slurm -- "prolog job ${SLURM_JOB_ID:-?}: $*" 2>/dev/null
    echo "fabricd prolog: job ${SLURM_JOB_ID:-?}: $*" >&2
}

if [ -z "${SLURM_JOB_ID:-}" ] || [ -z "${SLURM_JOB_NODELIST:-}" ]; then
    log "SLURM_JOB_ID or SLURM_JOB_NODELIST not set; nothing done"
    exit 0
fi
if ! hosts=$("$FABRICCTL" hostlist expand "$SLURM_JOB_NODELIST" 2>&1); then
    log "cannot expand SLURM_JOB_NODELIST: $hosts"
    exit 0
fi
# The end port GUIDs of the hosts (unknown hosts are named on stderr, and skipped).
err=$(mktemp) || { log "mktemp failed"; exit 0; }
# shellcheck disable=SC2086 # one argument per host
ports=$(timeout "$TIMEOUT" "$FABRICCTL" --socket "$SOCKET" hostlist ports $hosts 2>"$err")
rc=$?
msg=$(cat "$err"); rm -f "$err"
[ -n "$msg" ] && log "$msg"
if [ $rc -ne 0 ] || [ -z "$ports" ]; then
    log "no end ports for $SLURM_JOB_NODELIST (fabricctl exit $rc); job not mapped"
    exit 0
fi
# shellcheck disable=SC2086 # one argument per end port
if ! out=$(timeout "$TIMEOUT" "$FABRICCTL" --socket "$SOCKET" jobs set "$SLURM_JOB_ID" $ports 2>&1); then
    log "jobs set failed: $out"
    exit 0
fi
log "$out"
exit 0
