#!/usr/bin/env bash
# Subnet Administration benchmark (issue 14): fabricd against OpenSM 3.3.23 as master SA under
# the same ibsim, the same client and the same fabric, one manager after the other, each on a
# fresh simulator. Runnable by hand, not part of CI (docs/subnet-administration.md, "Acceptance
# and OpenSM comparison"). For every fabric and manager it prints one Markdown row:
#
#   * PathRecord tables: all paths from one source (GetTable with the SLID given), for --sources
#     sources one after the other, read with `fabric-saquery pr --slid L` (user-space RMPP: the
#     ibsim shim has none): records, seconds, records/s. Not the whole-fabric table: with LMC 1
#     it is one record per LID pair, 1 350² × 64 B = 117 MB at 648 nodes (OpenSM 3.3.23 under
#     the shim fails to send it, ERR 5430, and exits) and 3.7 GB at 3 456 nodes;
#   * --queries single PathRecord Get queries between random LID pairs from --clients client
#     processes at once (`fabric-saquery bench --queries N --clients K`, each client thread with
#     its own agent): queries/s, p50 and p99 latency (µs), errors;
#   * the fault-to-commit time of a reroute (a leaf uplink unlinked in the ibsim console) measured
#     while the same query load runs again and again, next to the same reroute on the idle
#     manager: OpenSM's next `SUBNET UP` log line, fabricd's commit (`committed_at_unix_ms` of
#     `fabricctl status`); the mean queries/s of the load during the reroute in parentheses.
#
# and finally the ratio fabricd / OpenSM of queries/s and of records/s per fabric.
#
# Without `fabric-saquery` (--client saquery, or when the binary is not built), the single queries
# are `saquery --src-to-dst A:B` processes (K loops in parallel; each process start and the
# shim's attach are inside the latency, so only the ratio between managers means something) and
# the tables are `saquery -p --slid L` (under the shim only their first segment arrives, so only
# the SA's time to build a table and send its first segment is measured).
#
# Usage: tests/sa-bench.sh [--specs "SPEC ..."] [--sms "opensm fabricd"] [--queries N]
#            [--clients K] [--sources S] [--client fabric-saquery|saquery] [--bin-dir DIR] [--keep DIR]
#            [--timeout SECONDS] [--no-reroute]
#   --specs    fabrics (fabricctl topo gen notation); default the 648- and 3 456-node PGFTs
#              "PGFT(2;18,36;1,18;1,1) PGFT(3;12,12,24;1,12,12;1,1,1)"
#   --sms      managers to run, in order (default "opensm fabricd")
#   --queries  single PathRecord queries per run (default 10000)
#   --clients  client processes/threads at once (default 4)
#   --sources  PathRecord tables (one per source) to read (default 16)
#   --client   fabric-saquery (default when built) or saquery
#   --bin-dir  directory holding fabricd, fabricctl and fabric-saquery (default: build them in
#              release)
#   --keep DIR keep the work files (logs, outputs) in DIR
#   --timeout  deadline of each step (default 600 s)
#   --no-reroute  skip the fault-to-commit measurements
#
# Needs ibsim (ibsim-utils), the umad2sim shim (libumad2sim0), opensm, infiniband-diags and
# python3. The simulator runs on a private socket (IBSIM_SOCKNAME), so parallel runs are fine.
set -euo pipefail
cd "$(dirname "$0")/.."

specs='PGFT(2;18,36;1,18;1,1) PGFT(3;12,12,24;1,12,12;1,1,1)'
sms="opensm fabricd"
queries=10000
clients=4
sources=16
client=""
bin_dir=""
keep=""
deadline=600
reroute=1
while [ $# -gt 0 ]; do
  case "$1" in
    --specs) specs=$2; shift 2 ;;
    --sms) sms=$2; shift 2 ;;
    --queries) queries=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --sources) sources=$2; shift 2 ;;
    --client) client=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --timeout) deadline=$2; shift 2 ;;
    --no-reroute) reroute=0; shift ;;
    -h|--help) sed -n '2,44p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "sa-bench: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# log, die, require_sim_tools, work_dir, pids and the clean-up on exit.
. tests/lib-work.sh sa-bench
require_sim_tools ibsim opensm saquery ibroute python3 timeout

if [ -z "$bin_dir" ]; then
  log "building fabricd, fabricctl and fabric-saquery (release)"
  cargo build --release -q -p fabricd -p fabricctl -p fabric-umad-probe
  bin_dir=${CARGO_TARGET_DIR:-target}/release
fi
bin_dir=$(cd "$bin_dir" && pwd)
fabricd=$bin_dir/fabricd
fabricctl=$bin_dir/fabricctl
fsaq=$bin_dir/fabric-saquery
[ -x "$fabricctl" ] || die "$fabricctl not found"
case " $sms " in *" fabricd "*) [ -x "$fabricd" ] || die "$fabricd not found" ;; esac
if [ -z "$client" ]; then
  if [ -x "$fsaq" ]; then client=fabric-saquery; else client=saquery; fi
fi
case "$client" in
  fabric-saquery) [ -x "$fsaq" ] || die "$fsaq not found (cargo build --release -p fabric-umad-probe)" ;;
  saquery) log "client saquery: latencies include a process start per query (see --help)" ;;
  *) die "--client must be fabric-saquery or saquery" ;;
esac

work_dir

# start_fabricd_steady DIR: `start_fabricd`, then waits for the escape VL.
start_fabricd_steady() {
  local dir=$1 t0
  start_fabricd "$dir"
  t0=$(now_ms)
  # The first five-phase update waits for the escape VL's SL-to-VL tables, programmed in the
  # background after the bring-up (OpenSM programs none): the reroutes are measured once they
  # are in, so that both managers are compared in their steady state.
  until "$fabricctl" --socket "$dir/s.sock" status --json 2>/dev/null \
      | python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if s.get("escape_vl_ready", s.get("escapeVlReady")) else 1)' 2>/dev/null; do
    [ $(($(now_ms) - t0)) -lt $((deadline * 1000)) ] || die "fabricd: escape VL not ready within $deadline s"
    sleep 0.1
  done
  log "fabricd escape VL ready after $(($(now_ms) - t0)) ms"
}

# lid_pairs DIR N: N random (source, destination) base-LID pairs of CAs, from ibroute of the tool
# host's leaf, one "A:B" per line (fixed seed).
lid_pairs() {
  under_sim "$1" "$tool_host" ibroute -D 0,1 | python3 -c '
import random, sys
lids = []
for l in sys.stdin:
    if l.startswith("0x") and "Channel Adapter portguid" in l:
        lids.append(int(l.split()[0], 16))
rnd = random.Random(1)
n = int(sys.argv[1])
out = []
while len(out) < n:
    a, b = rnd.choice(lids), rnd.choice(lids)
    if a != b:
        out.append("%d:%d" % (a, b))
print("\n".join(out))
' "$2"
}

# bench_queries DIR [NAME]: sets qps, p50, p99, errors of $queries single PathRecord queries (the
# client's JSON in DIR/NAME.json).
bench_queries() {
  local dir=$1 out=$1/${2:-bench-queries}.json
  if [ "$client" = fabric-saquery ]; then
    under_sim "$dir" "$tool_host" "$fsaq" bench --queries "$queries" --clients "$clients" >"$out" \
      || die "fabric-saquery bench failed: $(tail -3 "$out")"
  else
    lid_pairs "$dir" "$queries" >"$dir/pairs"
    local k cpids=()
    for k in $(seq 0 $((clients - 1))); do
      (
        awk -v k="$k" -v n="$clients" 'NR % n == k' "$dir/pairs" | while read -r p; do
          t0=$(date +%s%N)
          if under_sim "$dir" "$tool_host" saquery --src-to-dst "$p" 2>/dev/null | grep -q "PathRecord dump"; then
            echo "$(( ($(date +%s%N) - t0) / 1000 )) ok"
          else
            echo "$(( ($(date +%s%N) - t0) / 1000 )) error"
          fi
        done >"$dir/client-$k.lat"
      ) &
      cpids+=($!)
    done
    local t0 c
    t0=$(date +%s%N)
    for c in "${cpids[@]}"; do
      wait "$c" || true
    done
    local secs
    secs=$(python3 -c "print(($(date +%s%N) - $t0) / 1e9)")
    cat "$dir"/client-*.lat | python3 -c '
import json, sys
lat = []; err = 0
for l in sys.stdin:
    us, ok = l.split()
    lat.append(int(us)); err += ok != "ok"
lat.sort()
secs = float(sys.argv[1])
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0
print(json.dumps({"queries": len(lat), "seconds": secs, "queries_per_s": len(lat) / secs,
                  "p50_us": q(0.50), "p99_us": q(0.99), "errors": err}))
' "$secs" >"$out"
  fi
  read -r qps p50 p99 errors < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
d = d.get("bench", d)
def pick(*names):
    for k, v in d.items():
        if any(n in k.lower() for n in names):
            return v
    return "?"
r = lambda v: "%.0f" % v if isinstance(v, (int, float)) else v
print(r(pick("per_s", "qps", "/s")), r(pick("p50")), r(pick("p99")), pick("error"))
' "$out")
}

# bench_table DIR: sets records, table_s: the PathRecord tables of $sources sources (GetTable with
# the SLID given: every path from that source), one client process each, one after the other.
bench_table() {
  local dir=$1 out=$1/bench-table.txt src n cut=0 cuts=0 t0 t1 total_ns=0
  records=0
  : >"$out"
  for src in $(lid_pairs "$dir" "$sources" | cut -d: -f1); do
    t0=$(date +%s%N)
    if [ "$client" = fabric-saquery ]; then
      read -r n cut < <(under_sim "$dir" "$tool_host" "$fsaq" pr --slid "$src" \
        | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["raw_records_hex"]) if d.get("status") == 0 else -1, int(bool(d.get("unsegmented"))))') \
        || die "fabric-saquery pr --slid $src failed"
      cuts=$((cuts + cut))
    else
      n=$(under_sim "$dir" "$tool_host" saquery -p --slid "$src" | grep -c "PathRecord dump" || true)
    fi
    t1=$(date +%s%N)
    [ "$n" -ge 0 ] || die "PathRecord table from LID $src: error status"
    echo "$src $n $(( (t1 - t0) / 1000 ))" >>"$out"
    records=$((records + n))
    total_ns=$((total_ns + t1 - t0))
  done
  table_s=$(python3 -c "print('%.3f' % ($total_ns / 1e9))")
  [ "$client" = fabric-saquery ] || records="$records (first segments)"
  # Tables the SA sent without RMPP segmentation the client could follow (OpenSM under the shim).
  [ "$cuts" -eq 0 ] || records="$records ($cuts of $sources cut to their first MAD)"
}

# reroute_ms DIR SM N: unlinks the N-th leaf uplink of the net file (from 0) and prints the
# fault-to-commit time (ms).
reroute_ms() {
  local dir=$1 sm=$2 want=$3 leaf port t0 before
  read -r leaf port < <(awk -v want="$want" '
    /^Switch[ \t]/ { sw = ""; if ($0 ~ /"PGFT L0 /) { sw = $3; gsub(/"/, "", sw) }; next }
    sw != "" && /^\[[0-9]+\][ \t]+"S-/ { if (n++ == want) { gsub(/[\[\]]/, "", $1); print sw, $1; exit } }
  ' "$net")
  [ -n "$leaf" ] || die "no leaf uplink to unlink in $net"
  if [ "$sm" = opensm ]; then
    before=$(grep -c "SUBNET UP" "$dir/osm/opensm.log")
  else
    before=$(generation "$dir")
  fi
  t0=$(now_ms)
  echo "Unlink \"$leaf\"[$port]" >&"$console_fd"
  while :; do
    [ $(($(now_ms) - t0)) -lt $((deadline * 1000)) ] || die "no reroute within $deadline s after unlinking $leaf[$port]"
    if [ "$sm" = opensm ]; then
      [ "$(grep -c "SUBNET UP" "$dir/osm/opensm.log")" -gt "$before" ] && break
    else
      [ "$(generation "$dir")" -gt "$before" ] && break
    fi
    sleep 0.01
  done
  if [ "$sm" = fabricd ]; then
    "$fabricctl" --socket "$dir/s.sock" status --json \
      | python3 -c 'import json,sys; print(json.load(sys.stdin)["last_reroute"]["committed_at_unix_ms"] - int(sys.argv[1]))' "$t0"
  else
    echo $(($(now_ms) - t0))
  fi
}

echo "| fabric | SA | PR tables: records | s | records/s | single PR: queries/s | p50 µs | p99 µs | errors | reroute idle ms | reroute under load ms |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
declare -A qps_of rps_of
for spec in $specs; do
  tag=$(echo "$spec" | tr -c 'A-Za-z0-9' '_')
  net=$work/$tag.net
  "$fabricctl" topo gen "$spec" -o "$net"
  host=$(awk '/^(Ca|Hca)[ \t]/ { gsub(/"/, "", $3); print $3; exit }' "$net")
  # The clients run on a CA of another leaf (the 40th CA of the file).
  tool_host=$(awk '/^(Ca|Hca)[ \t]/ { gsub(/"/, "", $3); if (++n == 40) { print $3; exit } }' "$net")
  [ -n "$host" ] && [ -n "$tool_host" ] || die "not enough CAs in $net"
  for sm in $sms; do
    dir=$work/$tag-$sm
    mkdir -p "$dir"
    start_ibsim "$dir" "$net"
    case "$sm" in
      opensm) start_opensm "$dir" "s|^lmc .*|lmc 1|" ;;
      fabricd) start_fabricd_steady "$dir" ;;
      *) die "unknown manager $sm (opensm or fabricd)" ;;
    esac
    wait_sa "$dir"
    idle="-"
    loaded="-"
    [ "$reroute" -eq 1 ] && idle=$(reroute_ms "$dir" "$sm" 0)
    bench_table "$dir"
    bench_queries "$dir"
    if [ "$reroute" -eq 1 ]; then
      # The same query load again, repeated until the reroute is committed.
      rm -f "$dir/stop-load"
      (
        while [ ! -f "$dir/stop-load" ]; do
          bench_queries "$dir" bench-load 2>/dev/null
          echo "$qps" >>"$dir/load-qps"
        done
      ) &
      load=$!
      sleep 0.5
      loaded=$(reroute_ms "$dir" "$sm" 1)
      touch "$dir/stop-load"
      wait "$load" || true
      loaded="$loaded (load $(python3 -c "import sys; v=[float(x) for x in open(sys.argv[1]) if x.strip() not in ('', '?')]; print('%.0f q/s' % (sum(v) / len(v)) if v else '?')" "$dir/load-qps" 2>/dev/null || echo '?'))"
    fi
    rps=$(python3 -c "r='$records'.split()[0]; print('%.0f' % (float(r) / float('$table_s')) if r.replace('.', '').isdigit() else '?')")
    qps_of[$tag-$sm]=$qps
    rps_of[$tag-$sm]=$rps
    echo "| $spec | $sm | $records | $table_s | $rps | $qps | $p50 | $p99 | $errors | $idle | $loaded |"
    stop_pid "$sm_pid"
    stop_ibsim
  done
done
echo
for spec in $specs; do
  tag=$(echo "$spec" | tr -c 'A-Za-z0-9' '_')
  a=${qps_of[$tag-fabricd]:-} b=${qps_of[$tag-opensm]:-}
  c=${rps_of[$tag-fabricd]:-} e=${rps_of[$tag-opensm]:-}
  if [ -n "$a" ] && [ -n "$b" ]; then
    python3 -c "
a, b, c, e = '$a', '$b', '$c', '$e'
f = lambda x, y: '%.1f' % (float(x) / float(y)) if x.replace('.', '').isdigit() and y.replace('.', '').isdigit() and float(y) > 0 else '?'
print('$spec: fabricd / OpenSM single PathRecord queries/s %s, PathRecord table records/s %s' % (f(a, b), f(c, e)))"
  fi
done
