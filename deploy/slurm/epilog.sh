#!/bin/sh
# Slurm epilog for fabricd's job-aware routing: removes the job's mapping
# (`fabricctl jobs clear JOB_ID`) set by prolog.sh. Install as slurm.conf `EpilogSlurmctld=`.
#
# Input (set by Slurm): SLURM_JOB_ID. Optional: FABRICD_SOCKET (default
# /run/fabricd/fabricd.sock), FABRICCTL (default: fabricctl from PATH), FABRICD_TIMEOUT
# (seconds, default 10).
#
# It fails soft: whatever goes wrong (fabricd down, no such mapping because the prolog could not
# set it), it logs to syslog (tag fabricd-slurm) and stderr and exits 0.
FABRICCTL=${FABRICCTL:-fabricctl}
SOCKET=${FABRICD_SOCKET:-/run/fabricd/fabricd.sock}
TIMEOUT=${FABRICD_TIMEOUT:-10}

log() {
    logger -t fabricd-slurm -- "epilog job ${SLURM_JOB_ID:-?}: $*" 2>/dev/null
    echo "fabricd epilog: job ${SLURM_JOB_ID:-?}: $*" >&2
}

if [ -z "${SLURM_JOB_ID:-}" ]; then
    log "SLURM_JOB_ID not set; nothing done"
    exit 0
fi
if ! out=$(timeout "$TIMEOUT" "$FABRICCTL" --socket "$SOCKET" jobs clear "$SLURM_JOB_ID" 2>&1); then
    log "jobs clear failed: $out"
    exit 0
fi
log "$out"
exit 0
