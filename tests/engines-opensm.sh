#!/usr/bin/env bash
# Route-time table of issue 16 ("every engine's route time on the 8 640-node fabric, complete and
# 2 % removed, 2 threads, with OpenSM's engines on the same file"), in one run:
#
#   * OpenSM's engines (default ftree updn dfsssp minhop) on the file `fabricctl topo gen SPEC
#     [--remove-links N --seed 1]` writes, each on a fresh ibsim (`opensm --once -R ENGINE`), its
#     routing window from its log: from "building routing with '<engine>'" (after LID assignment)
#     to "<engine> tables configured on all switches" (tests/opensm-compare.sh's routing_windows_ms:
#     on this first sweep the window includes queuing the LFT Set MADs; a fallback, ftree refusing
#     a degraded fabric and minhop routing instead, is inside the window and named in "used");
#   * fabricd's engines on the same fabrics: `cargo bench -p fabric-routing --bench engines`
#     (ranking + the engine on the base LIDs, LMC 0, and the fabricd generation's routing,
#     LMC 1 with escape LIDs and validity check; 2 rayon threads; median (min–max) of ROUNDS).
#
# The two fabrics are the bench's: the complete SPEC and SPEC with 2 % of its inter-switch
# cables removed, seed 1 (`support::fabric`; the same cables as `topo gen --remove-links N
# --seed 1`, N = 2 % of the cables, rounded down). The load average (`uptime`) is printed at the
# start, between the two parts and at the end: the machine is shared, compare within one run.
#
# Usage: tests/engines-opensm.sh [--spec SPEC] [--sms "ftree updn dfsssp minhop"]
#            [--engines "dmodc ..."] [--rounds N] [--pcts "0 2"] [--bin-dir DIR]
#            [--timeout SECONDS] [--keep DIR] [--no-bench] [--bench-bin FILE]
#   --spec      fabric (default the 8 640-node PGFT(3;24,12,30;1,12,12;1,2,1))
#   --sms       OpenSM routing engines (`opensm -R` names), in order
#   --engines   fabricd engines for the bench (its ENGINES; default all of ENGINE_NAMES)
#   --rounds    timed runs per fabricd engine (the bench's ROUNDS, default 3)
#   --pcts      percentages of cables removed (default "0 2"; the bench measures 0 and 2 only)
#   --bin-dir   directory holding fabricctl (default: build it in release)
#   --timeout   deadline of each OpenSM run (default 3600 s)
#   --keep DIR  keep the work files (OpenSM logs) in DIR
#   --no-bench  OpenSM only
#   --bench-bin FILE  run this built engines bench (`cargo bench -p fabric-routing --bench engines
#               --no-run` prints its path) instead of `cargo bench`, e.g. to measure a fixed build
#
# Needs ibsim (ibsim-utils), the umad2sim shim (libumad2sim0), opensm and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

spec='PGFT(3;24,12,30;1,12,12;1,2,1)'
sms="ftree updn dfsssp minhop"
engines=""
rounds=3
pcts="0 2"
bin_dir=""
deadline=3600
keep=""
bench=1
bench_bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    --spec) spec=$2; shift 2 ;;
    --sms) sms=$2; shift 2 ;;
    --engines) engines=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --pcts) pcts=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --timeout) deadline=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --no-bench) bench=0; shift ;;
    --bench-bin) bench_bin=$2; shift 2 ;;
    -h|--help) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "engines-opensm: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# log, die, require_sim_tools, work_dir, start_ibsim/stop_ibsim/under_sim and the clean-up.
. tests/lib-work.sh engines-opensm
require_sim_tools ibsim opensm python3 timeout

if [ -z "$bin_dir" ]; then
  log "building fabricctl (release)"
  cargo build --release -q -p fabricctl
  bin_dir=${CARGO_TARGET_DIR:-target}/release
fi
bin_dir=$(cd "$bin_dir" && pwd)
fabricctl=$bin_dir/fabricctl
[ -x "$fabricctl" ] || die "$fabricctl not found"
work_dir

load() { uptime | sed 's/.*load average: //'; }
echo "load average at the start: $(load) ($(date -u +%H:%M) UTC)"

# routing_windows_ms LOG: OpenSM's routing computations in LOG, one line each (ms); see
# tests/opensm-compare.sh.
routing_windows_ms() {
  python3 "$root/tests/opensm-compare/routing_windows.py" "$1" 0
}

"$fabricctl" topo gen "$spec" -o "$work/full.net"
cables=$("$fabricctl" topo info "$work/full.net" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["links"])')
declare -A osm_ms osm_used
for pct in $pcts; do
  n=$((cables * pct / 100))
  net=$work/fabric-$pct.net
  if [ "$n" -gt 0 ]; then
    "$fabricctl" topo gen "$spec" -o "$net" --remove-links "$n" --seed 1
  else
    cp "$work/full.net" "$net"
  fi
  host=$(awk '/^(Ca|Hca)[ \t]/ { gsub(/"/, "", $3); print $3; exit }' "$net")
  for sm in $sms; do
    dir=$work/$sm-$pct
    osm=$dir/osm
    mkdir -p "$osm"
    start_ibsim "$dir" "$net"
    opensm -c "$osm/opensm.conf" >/dev/null 2>&1 || true
    [ -s "$osm/opensm.conf" ] || die "opensm -c did not write a config"
    sed -i -e "s|^log_file .*|log_file $osm/opensm.log|" \
      -e "s|^accum_log_file .*|accum_log_file FALSE|" \
      -e "s|^dump_files_dir .*|dump_files_dir $osm/|" \
      -e "s|^per_module_logging_file .*|per_module_logging_file $osm/per-module-logging.conf|" \
      "$osm/opensm.conf"
    printf 'osm_state_mgr.c=0x07\nosm_ucast_mgr.c=0x07\n' >"$osm/per-module-logging.conf"
    t0=$(now_ms)
    if OSM_CACHE_DIR=$osm under_sim "$dir" "$host" opensm --once -R "$sm" -F "$osm/opensm.conf" >"$osm/stdout" 2>&1; then
      ms=$(routing_windows_ms "$osm/opensm.log" | sed -n 1p)
      used=$(sed -n 's/.*-> osm_ucast_mgr_process: \([^ ]*\) tables configured on all switches.*/\1/p' "$osm/opensm.log" | tail -1)
      osm_ms[$sm-$pct]=${ms:-?}
      osm_used[$sm-$pct]=${used:-?}
    else
      osm_ms[$sm-$pct]="failed or over ${deadline} s"
      osm_used[$sm-$pct]="-"
    fi
    stop_ibsim
    log "OpenSM $sm, $pct % removed ($n cables): routing window ${osm_ms[$sm-$pct]} ms (${osm_used[$sm-$pct]}), $(( ($(now_ms) - t0) / 1000 )) s in all; load $(load)"
  done
done
echo "load average after OpenSM: $(load) ($(date -u +%H:%M) UTC)"

bench_out=$work/bench.md
if [ "$bench" -eq 1 ]; then
  run_bench=(cargo bench -q -p fabric-routing --bench engines)
  [ -z "$bench_bin" ] || run_bench=("$bench_bin")
  env ${engines:+ENGINES="$engines"} ROUNDS="$rounds" THREADS=2 SPEC="$spec" \
    "${run_bench[@]}" >"$bench_out" 2>"$work/bench.err" \
    || die "the engines bench failed: $(tail -5 "$work/bench.err")"
  echo "load average after the bench: $(load) ($(date -u +%H:%M) UTC)"
fi

echo
echo "Route time on \`$spec\`, complete and with 2 % of the inter-switch cables removed (seed 1)."
echo "OpenSM $(opensm --version 2>/dev/null | grep -m1 -o '[0-9][0-9.]*' | head -1): routing window of its first sweep under ibsim (\`opensm --once -R ENGINE\`; includes queuing the LFT MADs; \"used\" names the engine that configured the tables). fabricd: \`cargo bench -p fabric-routing --bench engines\`, 2 threads, median (min–max) of $rounds runs; engine = ranking + the engine (base LIDs, LMC 0); generation = ranking + route_all_checked (LMC 1, escape LIDs, validity check)."
echo
echo "| engine | complete | 2 % removed |"
echo "|---|---|---|"
for sm in $sms; do
  row="| OpenSM $sm"
  for pct in 0 2; do
    if [ -n "${osm_ms[$sm-$pct]:-}" ]; then
      row+=" | ${osm_ms[$sm-$pct]} ms ($([ "${osm_used[$sm-$pct]}" = "$sm" ] && echo "$sm" || echo "used: ${osm_used[$sm-$pct]}"))"
    else
      row+=" | -"
    fi
  done
  echo "$row |"
done
if [ "$bench" -eq 1 ]; then
  python3 - "$bench_out" <<'EOF'
import sys
rows = {}
order = []
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(f) != 6 or f[0] in ("fabric", "---") or f[0].startswith("-"):
        continue
    fabric, engine, eng_ms, cpu_ms, gen_ms, fb = f
    col = 0 if fabric == "complete" else 1
    if engine not in rows:
        rows[engine] = ["-", "-"]
        order.append(engine)
    if eng_ms.startswith("n/a"):
        rows[engine][col] = "n/a"
    else:
        rows[engine][col] = "%s ms (CPU %s ms, generation %s ms%s)" % (eng_ms, cpu_ms, gen_ms, "" if fb in ("none", "") else ", fallback " + fb)
for e in order:
    print("| fabricd %s | %s | %s |" % (e, rows[e][0], rows[e][1]))
EOF
fi
