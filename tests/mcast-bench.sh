#!/usr/bin/env bash
# Multicast join latency benchmark (issue 15): fabricd against OpenSM 3.3.23 as master SA under
# the same ibsim, the same client and the same fabric, one manager after the other, each on a
# fresh simulator. Runnable by hand, not part of CI (docs/multicast-partitions.md). All requests
# come from the project's client `fabric-saquery mcast-cycles` (one process, one agent, one
# request in flight) on a CA of another leaf than the manager's. For every manager it prints
# Markdown rows:
#
#   * "create+delete": --joins cycles of a FullMember join creating a new group (a new MGID each
#     cycle: the SA allocates an MLID) and its leave (the group is deleted, its MLID released):
#     p50 / p99 of the join, of the leave and of the round trip (µs), cycles/s, error answers,
#     distinct MLIDs answered (1 when every released MLID is reused);
#   * "join existing": --joins cycles of a FullMember join and leave of the IPoIB broadcast
#     group, which both managers create at start (no MLID allocation);
#   * "partial leave (leak check)": --leak-cycles cycles of a send-only member's join and partial
#     leave (FullMember+SendOnlyFullMember creating a new group, then leaving FullMember only:
#     the group loses its last full member and must go with its MLID). OpenSM 3.3.23 leaks an
#     MLID per cycle there and refuses creates (ERR_NO_RESOURCES) once its 1 024 MLIDs are
#     taken: the row gives the error answers, the first failing cycle and the distinct MLIDs.
#
# Usage: tests/mcast-bench.sh [--spec SPEC] [--sms "opensm fabricd"] [--joins N]
#            [--leak-cycles M] [--bin-dir DIR] [--keep DIR] [--timeout SECONDS]
#   --spec         fabric (fabricctl topo gen notation), default "PGFT(2;16,16;1,8;1,1)"
#                  (256 CAs, 24 switches)
#   --sms          managers to run, in order (default "opensm fabricd")
#   --joins        join/leave cycles per measurement (default 2000)
#   --leak-cycles  cycles of the partial-leave leak check (default 1100; 0 skips it)
#   --bin-dir      directory holding fabricd, fabricctl and fabric-saquery (default: build them
#                  in release)
#   --keep DIR     keep the work files (logs, outputs) in DIR
#   --timeout      deadline of each step (default 600 s)
#
# Needs ibsim (ibsim-utils), the umad2sim shim (libumad2sim0), opensm, infiniband-diags and
# python3. The simulator runs on a private socket (IBSIM_SOCKNAME), so parallel runs are fine.
set -euo pipefail
cd "$(dirname "$0")/.."

spec='PGFT(2;16,16;1,8;1,1)'
sms="opensm fabricd"
joins=2000
leak_cycles=1100
bin_dir=""
keep=""
deadline=600
while [ $# -gt 0 ]; do
  case "$1" in
    --spec) spec=$2; shift 2 ;;
    --sms) sms=$2; shift 2 ;;
    --joins) joins=$2; shift 2 ;;
    --leak-cycles) leak_cycles=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --timeout) deadline=$2; shift 2 ;;
    -h|--help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "mcast-bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# log, die, require_sim_tools, work_dir, pids and the clean-up on exit.
. tests/lib-work.sh mcast-bench
require_sim_tools ibsim opensm saquery python3 timeout

if [ -z "$bin_dir" ]; then
  log "building fabricd, fabricctl and fabric-saquery (release)"
  cargo build --release -q -p fabricd -p fabricctl -p fabric-umad-probe
  bin_dir=${CARGO_TARGET_DIR:-target}/release
fi
bin_dir=$(cd "$bin_dir" && pwd)
fabricd=$bin_dir/fabricd
fabricctl=$bin_dir/fabricctl
fsaq=$bin_dir/fabric-saquery
for b in "$fabricctl" "$fsaq"; do
  [ -x "$b" ] || die "$b not found (cargo build --release -p fabricctl -p fabric-umad-probe)"
done
case " $sms " in *" fabricd "*) [ -x "$fabricd" ] || die "$fabricd not found" ;; esac

work_dir

# stop_all: stops the manager and the simulator of one run.
stop_all() {
  exec {console_fd}>&-
  local p
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  pids=()
}

# row SM WHAT JSONFILE: one Markdown row of a `fabric-saquery mcast-cycles` result.
row() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
sm, what, path = sys.argv[1:4]
d = json.load(open(path))["mcast_cycles"]
errors = sum(n for s, n in d["join_statuses"].items() if s != "0x0000") \
       + sum(n for s, n in d["leave_statuses"].items() if s != "0x0000")
first = d.get("first_error")
first = "-" if not first else "%s #%d: %#06x" % (first["request"], first["cycle"], first["status"])
print("| %s | %s | %d | %d / %d | %d / %d | %d / %d | %.0f | %d | %s | %d |" % (
    sm, what, d["cycles"], d["join"]["p50_us"], d["join"]["p99_us"], d["leave"]["p50_us"],
    d["leave"]["p99_us"], d["cycle"]["p50_us"], d["cycle"]["p99_us"], d["cycles_per_s"], errors,
    first, d["distinct_mlids"]))
PY
}

# cycles DIR NAME ARGS...: `fabric-saquery mcast-cycles ARGS` on the tool host into DIR/NAME.json.
cycles() {
  local dir=$1 name=$2
  shift 2
  under_sim "$dir" "$tool_host" "$fsaq" mcast-cycles "$@" >"$dir/$name.json" \
    || die "fabric-saquery mcast-cycles $* failed: $(tail -3 "$dir/$name.json")"
}

net=$work/fabric.net
"$fabricctl" topo gen "$spec" -o "$net"
host=$(awk '/^(Ca|Hca)[ \t]/ { gsub(/"/, "", $3); print $3; exit }' "$net")
# The client runs on a CA of another leaf (the 40th CA of the file).
tool_host=$(awk '/^(Ca|Hca)[ \t]/ { gsub(/"/, "", $3); if (++n == 40) { print $3; exit } }' "$net")
[ -n "$host" ] && [ -n "$tool_host" ] || die "not enough CAs in $net"

echo "fabric $spec; client fabric-saquery mcast-cycles on $tool_host, manager on $host"
echo
echo "| SA | cycles of | n | join p50 / p99 µs | leave p50 / p99 µs | round trip p50 / p99 µs | cycles/s | error answers | first error | distinct MLIDs |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for sm in $sms; do
  dir=$work/$sm
  mkdir -p "$dir"
  start_ibsim "$dir" "$net"
  case "$sm" in
    opensm) start_opensm "$dir" ;;
    fabricd) start_fabricd "$dir" ;;
    *) die "unknown manager $sm (opensm or fabricd)" ;;
  esac
  wait_sa "$dir"
  cycles "$dir" create --count "$joins" --mgid ff12:e01b::9:0 --fresh-mgid --create
  row "$version" "create+delete" "$dir/create.json"
  cycles "$dir" existing --count "$joins" --mgid ff12:401b:ffff::ffff:ffff
  row "$version" "join existing" "$dir/existing.json"
  if [ "$leak_cycles" -gt 0 ]; then
    cycles "$dir" leak --count "$leak_cycles" --mgid ff12:e01b::a:0 --fresh-mgid --create \
      --join-state full+send-only-full --leave-state full
    row "$version" "partial leave (leak check)" "$dir/leak.json"
  fi
  stop_all
done
