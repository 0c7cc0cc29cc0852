#!/usr/bin/env bash
# fabricd vs OpenSM under ibsim (issue 6): runs OpenSM (`-R ftree`, `updn`, `minhop`) and
# fabricd (umad driver) one after the other on the same simulated fabric, each on a fresh ibsim,
# and prints one Markdown row per subnet manager:
#
#   * time from process start to "all switches programmed": OpenSM's `SUBNET UP` log line
#     (LIDs assigned, LFTs uploaded, ports ACTIVE; `--once` sweep) and fabricd's first committed
#     generation (`committed_at_unix_ms` of `fabricctl status --json`: discovery, LIDs, port
#     activation and every LFT block written); median (min-max) of --repeat runs, each on a fresh
#     quiet ibsim. fabricd then programs the SL-to-VL tables of its escape VL in the background
#     (needed only by the first five-phase update, not by the first generation): the time until
#     `escape_vl_ready` (`escape_vl_ready_at_unix_ms`) is reported in a second table;
#   * SMPs sent until then, counted the same way for both in one more run on a verbose ibsim:
#     the MADs ibsim answered, from its log (`ibsim -v` prints one `sim_read_pkt: replying` line
#     per MAD it processed for a client, bounced ones included, and one `process_packet` line
#     with the attribute ID); fabricd runs with the light sweep off (`sweep_interval_ms = 0`) so
#     that nothing else is counted while it waits to be stopped. The verbose log slows ibsim by
#     a few microseconds per MAD, which is why the times come from the quiet runs. For fabricd
#     the count is taken when the status poll sees the first commit, less the SLtoVL MADs
#     (fabricd writes none before that commit: those are its escape VL's background programming,
#     started by the commit), and again once the escape VL is ready; fabricd's own counters
#     (`driver_smps_sent` of the commit and of Status) are printed next to them as a check;
#   * the congestion metrics of the tables the switches really hold after the last timed run:
#     read back with `ibnetdiscover` (topology and the LIDs the SM assigned) and `ibroute -n` per
#     switch LID, then `fabricctl analyze DISCOVERED --lfts DUMP --guid2lid LIDS` (base LIDs).
#   * with --fault-after: the churn of single cable faults (issue 16, minimal churn), per OpenSM
#     engine: on a fresh ibsim whose console reads a FIFO, a long-running OpenSM (sweep_interval
#     1 s) comes up; its tables are read back (`ibroute -n` per switch LID); then, one fault at a
#     time, the cable is taken down in ibsim (console `Unlink "NODEID"[PORT]`), OpenSM's light
#     sweep sees the port change and re-routes (waited for: one more `SUBNET UP` in its log), the
#     tables are read back again and compared with the previous read-back: LFT blocks of 64 LIDs
#     that differ over all switches (tests/opensm-compare/lft_diff.py), switches touched, entries;
#     then the cable is restored (`ReLink`), OpenSM re-routes again, the tables are read back and
#     become the reference of the next fault ("restored" says whether they equal the first ones).
#     OpenSM's routing window of the fault's re-sweep (see routing_windows_ms) is reported too.
#
# Usage: tests/opensm-compare.sh [--spec SPEC] [--remove-links N] [--seed S]
#            [--sms "ftree updn minhop fabricd"] [--bin-dir DIR] [--rp N] [--no-a2a]
#            [--repeat N] [--timeout SECONDS] [--keep DIR] [--no-smp-count]
#            [--fault-after "GUID[PORT] ..."] [--churn-only] [--fabricd-engine ENGINE]
#            [--fabricd-direct] [--json-out FILE]
#   --spec          fabric (fabricctl topo gen notation); default PGFT(2;18,36;1,18;1,1), 648 nodes
#   --file          use this topology file (ibnetdiscover format, e.g. a Slim Fly) instead of --spec
#   --remove-links  remove N random inter-switch cables (seed --seed) before starting
#   --sms           which managers to run, in order: OpenSM engines by name, and fabricd as
#                   `fabricd` (LMC 1: base and escape LIDs, five-phase updates; its escape VL is one
#                   more data VL) or `fabricd-direct` (`[routing] lmc = 0`, `[update] five_phase =
#                   false`: no escape LID, direct uploads, so its data VLs are its layers, as
#                   OpenSM's), each optionally `=ENGINE` (`fabricd=balanced:2`, `fabricd-direct=dfsssp`);
#                   several fabricd variants may be named in one run
#   --bin-dir       directory holding fabricd and fabricctl (default: build them in release)
#   --rp            random permutations for mu_rp (default 100)
#   --no-a2a        skip mu_a2a (quadratic in the node count)
#   --timeout       deadline of each manager's run and of each read-back tool (default 600 s)
#   --keep DIR      keep the work files (logs, dumps) in DIR
#   --repeat        timed runs per manager, and re-sweeps in the last run: OpenSM's (SIGHUP) and
#                   fabricd's (`fabricctl reroute --wait`, a full recomputation) (default 1)
#   --no-smp-count  skip the SMP-counting run
#   --fault-after   cables to fail one at a time after SUBNET UP, each by one switch end: node
#                   GUID and port, e.g. as listed by `fabricctl churn FILE --list` (OpenSM
#                   engines only; fabricd's churn on the same cables: `fabricctl churn --fault`)
#   --churn-only    with --fault-after: only the churn runs (no timed runs, read-back, SMP count)
#   --fabricd-engine fabricd's `[routing] engine` for the variants without `=ENGINE` (default: dfsssp
#                   when --sms names dfsssp, lash or nue, the topology-agnostic comparison of issue
#                   19; else fabricd's default, dmodc)
#   --fabricd-direct every `fabricd` of --sms runs as `fabricd-direct` (LMC 0, direct updates)
#   --json-out FILE append one JSON object per manager (the table's figures) to FILE, for drivers
#                   such as tests/direct-compare.sh
#
# VLs used (column "VLs"): OpenSM dfsssp's "Virtual Lanes needed" and lash's "Lanes needed" log
# lines (dfsssp then balances its paths over every available VL), nue's nue_max_num_vls (1 by
# default), 1 for the other engines; fabricd: the data VLs of its first generation (Status
# `data_vls`: its VL layers and, with LMC 1, the escape VL 1; `vl_layers` in parentheses). At
# LMC 0 (`fabricd-direct`) layer i is on SL/VL i, so data VLs = layers; should they ever differ,
# the VLs column reads "L used (data VLs D)".
#
# Needs ibsim (ibsim-utils), the umad2sim shim (libumad2sim0), opensm, infiniband-diags and
# python3. The simulator runs on a private socket (IBSIM_SOCKNAME), so parallel runs are fine.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

spec='PGFT(2;18,36;1,18;1,1)'
remove_links=0
seed=1
sms="ftree updn minhop fabricd"
bin_dir=""
rp=100
a2a=1
deadline=600
keep=""
count=1
repeat=1
fd_resweeps=0
fd_resweep_ms=""
faults=""
churn_only=0
file=""
fabricd_engine=""
fabricd_direct=0
json_out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --spec) spec=$2; shift 2 ;;
    --file) file=$2; shift 2 ;;
    --remove-links) remove_links=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --sms) sms=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --rp) rp=$2; shift 2 ;;
    --no-a2a) a2a=0; shift ;;
    --timeout) deadline=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --no-smp-count) count=0; shift ;;
    --fault-after) faults=$2; shift 2 ;;
    --churn-only) churn_only=1; shift ;;
    --fabricd-engine) fabricd_engine=$2; shift 2 ;;
    --fabricd-direct) fabricd_direct=1; shift ;;
    --json-out) json_out=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) sed -n '2,78p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "opensm-compare: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "$fabricd_engine" ]; then
  case " $sms " in
    *" dfsssp "*|*" lash "*|*" nue "*) fabricd_engine=dfsssp ;;
  esac
fi
if [ "$fabricd_direct" -eq 1 ]; then
  sms=$(for sm in $sms; do case "$sm" in fabricd|fabricd=*) echo "fabricd-direct${sm#fabricd}" ;; *) echo "$sm" ;; esac; done | xargs)
fi
# is_fabricd SM: whether the --sms entry SM is a fabricd variant.
is_fabricd() { case "$1" in fabricd|fabricd=*|fabricd-direct|fabricd-direct=*) return 0 ;; *) return 1 ;; esac; }
# fabricd_variant SM: sets fd_direct (0/1) and fd_engine (empty: fabricd's default) of a variant.
fabricd_variant() {
  local v=${1%%=*}
  fd_direct=0
  [ "$v" = fabricd-direct ] && fd_direct=1
  fd_engine=$fabricd_engine
  case "$1" in *=*) fd_engine=${1#*=} ;; esac
}
for sm in $sms; do
  case "$sm" in
    fabricd*) is_fabricd "$sm" || { echo "opensm-compare: unknown fabricd variant $sm (see --help)" >&2; exit 2; } ;;
  esac
done

# log, die, require_sim_tools, work_dir, pids and the clean-up on exit.
. tests/lib-work.sh opensm-compare
require_sim_tools ibsim opensm ibnetdiscover ibroute python3 timeout

if [ -z "$bin_dir" ] && [ "$churn_only" -eq 1 ]; then
  log "building fabricctl (release)"
  cargo build --release -q -p fabricctl
  bin_dir=${CARGO_TARGET_DIR:-target}/release
elif [ -z "$bin_dir" ]; then
  log "building fabricd and fabricctl (release)"
  cargo build --release -q -p fabricd -p fabricctl
  bin_dir=${CARGO_TARGET_DIR:-target}/release
fi
bin_dir=$(cd "$bin_dir" && pwd)
fabricd=$bin_dir/fabricd
fabricctl=$bin_dir/fabricctl
[ -x "$fabricd" ] || [ "$churn_only" -eq 1 ] || [[ " $sms " != *" fabricd"* ]] || die "$fabricd not found"
[ -x "$fabricctl" ] || die "$fabricctl not found"

work_dir

net=$work/fabric.net
if [ -n "$file" ]; then
  [ "$remove_links" -eq 0 ] || die "--remove-links does not apply to --file"
  cp "$file" "$net"
  spec=$(basename "$file")
else
  gen_args=(topo gen "$spec" -o "$net")
  [ "$remove_links" -gt 0 ] && gen_args+=(--remove-links "$remove_links" --seed "$seed")
  "$fabricctl" "${gen_args[@]}"
fi
# ibsim's tables: nodes, switches and ports (a switch has ports 0..=N) with some headroom.
read -r nnodes nswitches nports < <(awk '
  /^Switch[ \t]/ { n++; s++; p += $2 + 1 }
  /^(Ca|Hca|Rt)[ \t]/ { n++; p += $2 }
  END { print n + 16, s + 16, p + 256 }' "$net")
# The SMs attach to the first CA of the file.
host=$(awk '/^(Ca|Hca)[ \t]/ { gsub(/"/, "", $3); print $3; exit }' "$net")
[ -n "$host" ] || die "no CA in $net"
nodes=$("$fabricctl" topo info "$net" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["nodes"])')
log "fabric $spec (removed links: $remove_links): $nodes end ports, $((nswitches - 16)) switches; work dir $work"

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# start_ibsim DIR [console]: a fresh simulator with its verbose log in DIR/ibsim.log; sets sim_pid,
# sock. With `console`, its console reads the FIFO DIR/ibsim.cmd, held open for writing on fd 7
# (`echo CMD >&7`).
start_ibsim() {
  local dir=$1 console=${2:-}
  sock="ocmp-$$-$(basename "$dir")"
  local verbose=() noconsole=(-n) input=/dev/null
  [ "$sim_verbose" -eq 1 ] && verbose=(-v)
  if [ "$console" = console ]; then
    rm -f "$dir/ibsim.cmd"
    mkfifo "$dir/ibsim.cmd"
    # Read-write: neither side blocks on open, and ibsim never sees end-of-file.
    exec 7<>"$dir/ibsim.cmd"
    noconsole=()
    input=$dir/ibsim.cmd
  fi
  (cd "$dir" && IBSIM_SOCKNAME=$sock exec ibsim -s "${noconsole[@]}" "${verbose[@]}" -N "$nnodes" -S "$nswitches" -P "$nports" "$net" \
    <"$input" >ibsim.log 2>&1) &
  sim_pid=$!
  pids+=("$sim_pid")
  local t0
  t0=$(now_ms)
  until grep -q "Network simulator ready." "$dir/ibsim.log" 2>/dev/null; do
    kill -0 "$sim_pid" 2>/dev/null || die "ibsim exited: $(tail -5 "$dir/ibsim.log")"
    [ $(($(now_ms) - t0)) -lt 60000 ] || die "ibsim not ready after 60 s"
    sleep 0.05
  done
}

# stop_pid PID: stops one of our processes and forgets it (a reaped PID may be reused).
stop_pid() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  local keep=() p
  for p in "${pids[@]}"; do
    [ "$p" = "$1" ] || keep+=("$p")
  done
  pids=("${keep[@]}")
}

# MADs ibsim answered so far (one line each in its verbose log); also writes DIR/smps-by-attr
# (count and attribute ID of each, from the `process_packet: packet (attr ...)` lines).
smps_so_far() {
  local dir=$1 n
  if [ "$sim_verbose" -eq 0 ]; then
    echo -1
    return
  fi
  n=$(wc -l <"$dir/ibsim.log")
  head -n "$n" "$dir/ibsim.log" | grep -o "process_packet: packet (attr 0x[0-9a-f]*" \
    | sed 's/.*attr //' | sort | uniq -c >"$dir/smps-by-attr"
  head -n "$n" "$dir/ibsim.log" | grep -c "sim_read_pkt: replying" || true
}

# under_sim DIR CMD...: CMD as a client of the simulator, on the SM's host, in DIR.
under_sim() {
  local dir=$1
  shift
  (cd "$dir" && IBSIM_SOCKNAME=$sock SIM_HOST=${read_host:-$host} LD_PRELOAD=$shim exec timeout "$deadline" "$@")
}

# Up to 8 other hosts, spread over the file, to read a switch table from when the SM's host has no
# LID route to that switch: on a degraded fat-tree a top switch that lost its cable to the
# SM's pod has no up-down path from there (docs/routing.md, switch LIDs).
mapfile -t alt_hosts < <(awk '/^(Ca|Hca)[ \t]/ { gsub(/"/, "", $3); print $3 }' "$net" \
  | awk '{ h[NR] = $0 } END { step = int(NR / 9) + 1; for (i = step; i <= NR && n < 8; i += step) { print h[i]; n++ } }')

# routing_windows_ms LOG: OpenSM's routing computations in LOG, one line each (ms): from
# "building routing with '<engine>'" (after LID assignment) to "<engine> tables configured on all
# switches" (its LFTs built and the changed blocks queued for the VL15 thread, which sends them
# afterwards). A fallback (ftree refusing a degraded fabric, then minhop) is inside the window: it
# is what OpenSM spends before it has tables.
routing_windows_ms() {
  python3 "$root/tests/opensm-compare/routing_windows.py" "$1" 2
}

# opensm_vls OSMDIR ENGINE: the VLs the engine's routing uses, from its log and config (see the header).
opensm_vls() {
  local osm=$1 engine=$2 n
  case "$engine" in
    dfsssp) n=$(sed -n 's/.*Virtual Lanes needed: \([0-9]*\).*/\1/p' "$osm/opensm.log" | tail -1) ;;
    lash) n=$(sed -n 's/.*Lanes needed: \([0-9]*\).*/\1/p' "$osm/opensm.log" | tail -1) ;;
    nue) n=$(awk '$1 == "nue_max_num_vls" { print ($2 == 0 ? "max" : $2) }' "$osm/opensm.conf" | tail -1) ;;
    *) n=1 ;;
  esac
  echo "${n:-?}"
}

# run_opensm DIR ENGINE: sets up_ms, smps, used (engine that configured the tables), vls.
run_opensm() {
  local dir=$1 engine=$2 osm=$1/osm
  mkdir -p "$osm"
  opensm -c "$osm/opensm.conf" >/dev/null 2>&1 || true
  [ -s "$osm/opensm.conf" ] || die "opensm -c did not write a config"
  # Private log, dump and cache directories; the state and ucast managers at verbosity 0x07 (their
  # boxes and "tables configured"), the rest at the default 0x03.
  sed -i -e "s|^log_file .*|log_file $osm/opensm.log|" \
    -e "s|^accum_log_file .*|accum_log_file FALSE|" \
    -e "s|^dump_files_dir .*|dump_files_dir $osm/|" \
    -e "s|^per_module_logging_file .*|per_module_logging_file $osm/per-module-logging.conf|" \
    "$osm/opensm.conf"
  printf 'osm_state_mgr.c=0x07\nosm_ucast_mgr.c=0x07\n' >"$osm/per-module-logging.conf"
  local t0
  t0=$(date +%s%N)
  if ! OSM_CACHE_DIR=$osm under_sim "$dir" opensm --once -R "$engine" -F "$osm/opensm.conf" >"$osm/stdout" 2>&1; then
    die "opensm -R $engine failed or timed out; see $osm/opensm.log"
  fi
  smps=$(smps_so_far "$dir")
  up_ms=$(python3 - "$osm/opensm.log" "$t0" <<'EOF'
import sys, time, datetime
log, t0 = sys.argv[1], int(sys.argv[2])
up = None
for line in open(log, encoding="utf-8", errors="replace"):
    if line.rstrip().endswith("-> SUBNET UP"):
        f = line.split()
        now = datetime.datetime.now()
        for year in (now.year, now.year - 1):
            d = datetime.datetime.strptime(f"{year} {f[0]} {f[1]} {f[2]}", "%Y %b %d %H:%M:%S")
            t = time.mktime(d.timetuple()) + int(f[3]) / 1e6
            if t <= time.time() + 86400:
                break
        up = t
        break
if up is None:
    sys.exit("no SUBNET UP in " + log)
print("%.1f" % ((up - t0 / 1e9) * 1e3))
EOF
) || die "OpenSM did not reach SUBNET UP; see $osm/opensm.log"
  used=$(sed -n 's/.*-> osm_ucast_mgr_process: \([^ ]*\) tables configured on all switches.*/\1/p' "$osm/opensm.log" | tail -1)
  used=${used:-?}
  vls=$(opensm_vls "$osm" "$engine")
  # Routing computation of this first sweep (see routing_windows_ms).
  route_ms=$(routing_windows_ms "$osm/opensm.log" | sed -n 1p)
  [ -n "$route_ms" ] || die "no routing start/end lines in $osm/opensm.log"
}

# resweep_opensm DIR ENGINE: OpenSM's routing computation alone. On the simulator of the last timed
# run (its switches hold that run's tables), a long-running OpenSM comes up (rewriting every block:
# a new process does not know what the switches hold), then SIGHUP makes it sweep heavily again:
# same topology, same LIDs, the same tables, so that second window has no LFT MAD to queue. With
# --repeat N, N SIGHUPs one after the other: resweep_ms is the median of their N windows.
resweep_opensm() {
  local dir=$1 engine=$2 osm=$1/osm-resweep
  rm -rf "$osm"
  mkdir -p "$osm"
  cp "$1/osm/opensm.conf" "$osm/opensm.conf"
  # A heavy sweep requested by SIGHUP runs at the next sweep tick: tick every second.
  sed -i -e "s|$1/osm/|$osm/|g" -e "s|^sweep_interval .*|sweep_interval 1|" "$osm/opensm.conf"
  printf 'osm_state_mgr.c=0x07\nosm_ucast_mgr.c=0x07\n' >"$osm/per-module-logging.conf"
  cp "$1/osm/guid2lid" "$osm/" 2>/dev/null || true
  (OSM_CACHE_DIR=$osm under_sim "$dir" opensm -R "$engine" -F "$osm/opensm.conf" >"$osm/stdout" 2>&1) &
  local waiter=$! t0 pid="" n
  t0=$(now_ms)
  # wait_lines PATTERN COUNT: until the log has COUNT lines matching PATTERN.
  wait_lines() {
    while n=$(grep -c -- "$1" "$osm/opensm.log" 2>/dev/null); [ "${n:-0}" -lt "$2" ]; do
      kill -0 "$waiter" 2>/dev/null || die "OpenSM (re-sweep run) exited; see $osm/opensm.log"
      [ $(($(now_ms) - t0)) -lt $((deadline * 1000)) ] || die "OpenSM (re-sweep run): no '$1' x$2"
      sleep 0.05
    done
  }
  wait_lines "-> SUBNET UP" 1
  for p in $(pgrep -x opensm); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "-F $osm/opensm.conf" && pid=$p
  done
  [ -n "$pid" ] || die "OpenSM (re-sweep run): process not found"
  local k
  for k in $(seq 1 "$repeat"); do
    kill -HUP "$pid"
    wait_lines "-> SUBNET UP" $((k + 1))
  done
  kill "$pid" 2>/dev/null || true
  wait "$waiter" 2>/dev/null || true
  resweep_ms=$(routing_windows_ms "$osm/opensm.log" | sed -n "2,$((repeat + 1))p" | python3 -c '
import statistics, sys
v = [float(x) for x in sys.stdin.read().split()]
print("%.2f" % statistics.median(v) if v else "")')
  [ -n "$resweep_ms" ] || die "no re-sweep routing window in $osm/opensm.log"
}

# resweep_fabricd DIR: fabricd's routing computation on a re-sweep, like OpenSM's after SIGHUP: on
# the fabric it has just programmed, `fabricctl reroute --wait` $fd_resweeps times, one after the
# other; a forced reroute is a full recomputation (ranking, LIDs, engine, VL layering, validity
# check, partitions, diff: nothing of the previous generation reused, `full_recompute=true` in its
# "generation committed" line, checked here) of an unchanged fabric, so no block is written.
# Sets fd_resweep_ms (median compute_ms of the reroutes' generations).
resweep_fabricd() {
  local dir=$1 k st v=()
  for k in $(seq 1 "$fd_resweeps"); do
    "$fabricctl" --socket "$dir/s.sock" reroute --wait >/dev/null || die "fabricctl reroute failed"
    st=$("$fabricctl" --socket "$dir/s.sock" status --json) || die "fabricctl status failed"
    v+=("$(printf '%s' "$st" | python3 -c '
import json, sys
r = json.load(sys.stdin)["last_reroute"]
if r.get("blocks_written", 0):
    sys.exit("fabricd re-sweep wrote %d blocks (the tables changed)" % r["blocks_written"])
print("%.2f" % r["compute_ms"])')") || die "fabricd re-sweep: ${v[*]}"
  done
  local full
  full=$(grep -c 'generation committed.*full_recompute=true' "$dir/fabricd.log" || true)
  [ "${full:-0}" -eq "$fd_resweeps" ] || die "fabricd: $full full recomputations logged, $fd_resweeps reroutes"
  fd_resweep_ms=$(median_of "${v[@]}")
  log "fabricd re-sweeps (compute_ms): ${v[*]}"
}

# run_fabricd DIR DIRECT ENGINE: sets up_ms, smps, used, and vl_ms (escape VL ready), smps_vl
# (ibsim count then), own_smps (fabricd's count at the commit), own_smps_vl (its count at escape VL
# ready). DIRECT 1: `[routing] lmc = 0` and `[update] five_phase = false` (no escape LIDs, so no
# escape VL: vl_ms and the counts at escape VL ready are "-"). ENGINE: `[routing] engine` (empty:
# fabricd's default).
run_fabricd() {
  local dir=$1 direct=$2 engine=$3
  cat >"$dir/fabricd.toml" <<'EOF'
[log]
level = "info"
timestamps = true

[driver]
kind = "umad"

[driver.umad]
# No light sweep: after the first generation nothing else is sent (the SMP count stays exact).
sweep_interval_ms = 0

[health]
# No PerfMgt reads (OpenSM's perfmgr is off by default too): ibsim's MAD count is then the SMP
# count the two managers are compared on.
enabled = false

[metrics]
# The comparison computes its own metrics from the tables read back.
random_perms = 0
shifts = false
all_to_all = false
EOF
  if [ -n "$engine" ] || [ "$direct" -eq 1 ]; then
    printf '\n[routing]\n' >>"$dir/fabricd.toml"
    [ -z "$engine" ] || printf 'engine = "%s"\n' "$engine" >>"$dir/fabricd.toml"
    [ "$direct" -eq 0 ] || printf 'lmc = 0\n\n[update]\nfive_phase = false\n' >>"$dir/fabricd.toml"
  fi
  local t0 fd_pid status
  t0=$(now_ms)
  (cd "$dir" && IBSIM_SOCKNAME=$sock SIM_HOST=$host LD_PRELOAD=$shim exec "$fabricd" --config fabricd.toml \
    --state-dir state --socket "$dir/s.sock" >fabricd.log 2>&1) &
  fd_pid=$!
  pids+=("$fd_pid")
  while :; do
    kill -0 "$fd_pid" 2>/dev/null || die "fabricd exited: $(tail -5 "$dir/fabricd.log")"
    [ $(($(now_ms) - t0)) -lt $((deadline * 1000)) ] || die "fabricd: no generation within $deadline s"
    if status=$("$fabricctl" --socket "$dir/s.sock" status --json 2>/dev/null); then
      up_ms=$(printf '%s' "$status" | python3 -c '
import json, sys
s = json.load(sys.stdin)
r = s.get("last_reroute") or {}
if s.get("generation", 0) >= 1 and s.get("phase") == "idle" and r.get("committed_at_unix_ms"):
    print("%.1f" % (r["committed_at_unix_ms"] - int(sys.argv[1])))
' "$t0")
      if [ -n "$up_ms" ]; then
        smps=$(smps_so_far "$dir")
        if [ "$smps" -ge 0 ]; then
          # fabricd writes no SL-to-VL table before its first commit with a single-VL engine: the
          # SLtoVL MADs already in the log were sent after it (the escape VL's background
          # programming). With a layering engine (dfsssp, layered) its data VL plan is written
          # before the tables, and these MADs are not counted either (the count is then low).
          late=$(awk '$2 == "0x17" { n += $1 } END { print n + 0 }' "$dir/smps-by-attr")
          smps=$((smps - late))
          grep -v ' 0x17$' "$dir/smps-by-attr" >"$dir/smps-by-attr.programmed" || true
        fi
        used=$(printf '%s' "$status" | python3 -c 'import json,sys; s=json.load(sys.stdin); print("%s, LMC %s" % (s.get("routed_by") or s["engine"], s["lmc"]))')
        vls=$(printf '%s' "$status" | python3 -c '
import json, sys
s = json.load(sys.stdin)
d, l = s.get("data_vls", "?"), s.get("vl_layers", 0)
if not l:
    print(d)
elif s.get("lmc", 1) == 0:
    print("%s used (data VLs %s)" % (l, d) if d != l else str(l))
else:
    print("%s (%s layers)" % (d, l))')
        own_smps=$(printf '%s' "$status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["last_reroute"].get("driver_smps_sent", -1))')
        # Routing computation of the first generation: topology, ranking, LIDs, Dmodc for the base
        # LIDs, Up*/Down* for the escape LIDs, the validity check and the LFT diff.
        route_ms=$(printf '%s' "$status" | python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["last_reroute"]["compute_ms"])')
        # The engines alone (Dmodc for the base LIDs plus Up*/Down* for the escape LIDs), from the
        # Metrics RPC; the metrics themselves are off in this configuration.
        engine_ms=$("$fabricctl" --socket "$dir/s.sock" metrics --json | python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["route_ms"])') \
          || die "fabricctl metrics failed"
        break
      fi
    fi
    sleep 0.05
  done
  printf '%s\n' "$status" >"$dir/status.json"
  if [ "$direct" -eq 1 ]; then
    # LMC 0: no escape LIDs, no escape VL to wait for.
    vl_ms="-"
    own_smps_vl="-"
    smps_vl=-1
    cp "$dir/status.json" "$dir/status-escape-vl.json"
    [ "$fd_resweeps" -eq 0 ] || resweep_fabricd "$dir"
    stop_pid "$fd_pid"
    return
  fi
  # The escape VL (SL-to-VL tables, in the background after the first generation).
  vl_ms=""
  while [ -z "$vl_ms" ]; do
    kill -0 "$fd_pid" 2>/dev/null || die "fabricd exited: $(tail -5 "$dir/fabricd.log")"
    [ $(($(now_ms) - t0)) -lt $((deadline * 1000)) ] || die "fabricd: escape VL not ready within $deadline s"
    if status=$("$fabricctl" --socket "$dir/s.sock" status --json 2>/dev/null); then
      vl_ms=$(printf '%s' "$status" | python3 -c '
import json, sys
s = json.load(sys.stdin)
if s.get("escape_vl_error"):
    sys.exit("escape VL error: " + s["escape_vl_error"])
if s.get("escape_vl_ready") and s.get("escape_vl_ready_at_unix_ms"):
    print("%.1f %d" % (s["escape_vl_ready_at_unix_ms"] - int(sys.argv[1]), s["driver_smps_sent"]))
' "$t0") || die "fabricd: $vl_ms"
    fi
    [ -n "$vl_ms" ] || sleep 0.05
  done
  read -r vl_ms own_smps_vl <<<"$vl_ms"
  smps_vl=$(smps_so_far "$dir")
  printf '%s\n' "$status" >"$dir/status-escape-vl.json"
  [ "$fd_resweeps" -eq 0 ] || resweep_fabricd "$dir"
  stop_pid "$fd_pid"
}

# read_back DIR: topology, LIDs and LFTs from the switches, then the metrics (DIR/metrics.json).
read_back() {
  local dir=$1
  under_sim "$dir" ibnetdiscover >"$dir/discovered.net" 2>"$dir/ibnetdiscover.err" \
    || die "ibnetdiscover failed: $(tail -3 "$dir/ibnetdiscover.err")"
  python3 "$root/tests/opensm-compare/lids.py" "$dir/discovered.net" "$dir/guid2lid" >"$dir/switch-lids"
  dump_lfts "$dir" "$dir/lfts.dump"
  local args=(analyze "$dir/discovered.net" --lfts "$dir/lfts.dump" --guid2lid "$dir/guid2lid" --rp "$rp" --seed 1 --json)
  [ "$a2a" -eq 1 ] || args+=(--no-a2a)
  "$fabricctl" "${args[@]}" >"$dir/metrics.json"
}

# dump_lfts DIR OUT: every switch's LFT (`ibroute -n` per LID of DIR/switch-lids, 4 at a time) into
# OUT, in the order of DIR/switch-lids; sets unread (switches no host could read).
dump_lfts() {
  local dir=$1 out=$2
  rm -rf "$dir/lft-parts"
  mkdir -p "$dir/lft-parts"
  # First every switch from the SM's host, in parallel (ibsim answers one MAD at a time, but
  # each ibroute spends most of its time starting and opening the simulated port).
  (cd "$dir" && IBSIM_SOCKNAME=$sock SIM_HOST=$host LD_PRELOAD=$shim xargs -P 4 -I{} \
    sh -c 'timeout "$1" ibroute -n "$2" >"lft-parts/$2" 2>>"lft-parts/$2.err" || rm -f "lft-parts/$2"' _ "$deadline" {} \
    <"$dir/switch-lids")
  : >"$out"
  local lid
  unread=0
  while read -r lid; do
    if [ -s "$dir/lft-parts/$lid" ]; then
      cat "$dir/lft-parts/$lid" >>"$out"
      continue
    fi
    # A switch that the tables do not route to from the SM's host is read from another host;
    # if none can reach it, its table is analysed as empty (the row says how many were not read).
    local h done=0
    for h in "${alt_hosts[@]}"; do
      if read_host=$h under_sim "$dir" ibroute -n "$lid" >"$dir/ibroute.out" 2>>"$dir/ibroute.err"; then
        cat "$dir/ibroute.out" >>"$out"
        log "switch LID $lid read from $h (no LID route from $host)"
        done=1
        break
      fi
    done
    if [ "$done" -eq 0 ]; then
      unread=$((unread + 1))
      log "warning: ibroute -n $lid failed from $host and ${#alt_hosts[@]} other hosts: $(tail -1 "$dir/lft-parts/$lid.err" 2>/dev/null)"
    fi
  done <"$dir/switch-lids"
  rm -rf "$dir/lft-parts"
}

# nodeid_of GUID: ibsim's node id (the quoted name of the `Switch` record) of the switch with node
# GUID GUID in the fabric file.
nodeid_of() {
  awk -v want="$1" '
    BEGIN { want = tolower(want); sub(/^0x0*/, "", want) }
    /^switchguid=/ { g = tolower($1); sub(/^switchguid=0x0*/, "", g); sub(/\(.*/, "", g); next }
    /^Switch[ \t]/ && g == want { if (match($0, /"[^"]*"/)) { print substr($0, RSTART + 1, RLENGTH - 2); exit } }
  ' "$net"
}

# churn_opensm DIR ENGINE: the churn of each cable of --fault-after under OpenSM -R ENGINE (see the
# header); writes one JSON object per fault to DIR/churn.jsonl.
churn_opensm() {
  local dir=$1 engine=$2 osm=$1/osm
  rm -rf "$dir"
  mkdir -p "$osm"
  sim_verbose=0
  start_ibsim "$dir" console
  opensm -c "$osm/opensm.conf" >/dev/null 2>&1 || true
  [ -s "$osm/opensm.conf" ] || die "opensm -c did not write a config"
  # A light sweep every second notices the port change of an unlinked cable.
  sed -i -e "s|^log_file .*|log_file $osm/opensm.log|" \
    -e "s|^accum_log_file .*|accum_log_file FALSE|" \
    -e "s|^dump_files_dir .*|dump_files_dir $osm/|" \
    -e "s|^per_module_logging_file .*|per_module_logging_file $osm/per-module-logging.conf|" \
    -e "s|^sweep_interval .*|sweep_interval 1|" \
    "$osm/opensm.conf"
  printf 'osm_state_mgr.c=0x07\nosm_ucast_mgr.c=0x07\n' >"$osm/per-module-logging.conf"
  (OSM_CACHE_DIR=$osm under_sim "$dir" opensm -R "$engine" -F "$osm/opensm.conf" >"$osm/stdout" 2>&1) &
  local waiter=$! t0 n
  pids+=("$waiter")
  t0=$(now_ms)
  # wait_up COUNT: until the log has COUNT `SUBNET UP` lines (one per completed heavy sweep).
  wait_up() {
    while n=$(grep -c -- "-> SUBNET UP" "$osm/opensm.log" 2>/dev/null); [ "${n:-0}" -lt "$1" ]; do
      kill -0 "$waiter" 2>/dev/null || die "OpenSM (churn run, $engine) exited; see $osm/opensm.log"
      [ $(($(now_ms) - t0)) -lt $((deadline * 1000)) ] || die "OpenSM (churn run, $engine): no SUBNET UP x$1 within $deadline s"
      sleep 0.1
    done
    # Settled: 3 s without a new routing computation or SUBNET UP (a port change seen by a
    # later light sweep starts another heavy sweep).
    local a b
    while :; do
      a=$(grep -c -e "-> SUBNET UP" -e "building routing with" "$osm/opensm.log")
      sleep 3
      b=$(grep -c -e "-> SUBNET UP" -e "building routing with" "$osm/opensm.log")
      [ "$a" = "$b" ] && break
      [ $(($(now_ms) - t0)) -lt $((deadline * 1000)) ] || die "OpenSM (churn run, $engine): never settled"
    done
  }
  wait_up 1
  under_sim "$dir" ibnetdiscover >"$dir/discovered.net" 2>"$dir/ibnetdiscover.err" \
    || die "ibnetdiscover failed: $(tail -3 "$dir/ibnetdiscover.err")"
  python3 "$root/tests/opensm-compare/lids.py" "$dir/discovered.net" "$dir/guid2lid" >"$dir/switch-lids"
  local t1
  t1=$(now_ms)
  dump_lfts "$dir" "$dir/ref.dump"
  log "$engine: tables read back in $(($(now_ms) - t1)) ms ($unread switches unreadable)"
  cp "$dir/ref.dump" "$dir/first.dump"
  : >"$dir/churn.jsonl"
  local f i=0 guid port id ups win used unread_fault p
  for f in $faults; do
    i=$((i + 1))
    guid=${f%%\[*}
    port=${f#*\[}
    port=${port%\]}
    id=$(nodeid_of "$guid")
    [ -n "$id" ] || die "--fault-after $f: no switch with GUID $guid in $net"
    ups=$(grep -c -- "-> SUBNET UP" "$osm/opensm.log")
    t0=$(now_ms)
    echo "Unlink \"$id\"[$port]" >&7
    wait_up $((ups + 1))
    # The re-sweep that answered the fault: its routing window (the last one in the log).
    win=$(routing_windows_ms "$osm/opensm.log" | tail -1)
    used=$(sed -n 's/.*-> osm_ucast_mgr_process: \([^ ]*\) tables configured on all switches.*/\1/p' "$osm/opensm.log" | tail -1)
    dump_lfts "$dir" "$dir/fault-$i.dump"
    unread_fault=$unread
    python3 "$root/tests/opensm-compare/lft_diff.py" "$dir/ref.dump" "$dir/fault-$i.dump" >"$dir/diff-$i.json"
    ups=$(grep -c -- "-> SUBNET UP" "$osm/opensm.log")
    t0=$(now_ms)
    echo "ReLink \"$id\"[$port]" >&7
    wait_up $((ups + 1))
    dump_lfts "$dir" "$dir/ref.dump"
    python3 "$root/tests/opensm-compare/lft_diff.py" "$dir/first.dump" "$dir/ref.dump" >"$dir/restore-$i.json"
    python3 - "$dir/diff-$i.json" "$dir/restore-$i.json" "$f" "$win" "${used:-?}" "$unread_fault" >>"$dir/churn.jsonl" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
r = json.load(open(sys.argv[2]))
d.update({"fault": sys.argv[3], "route_ms": float(sys.argv[4]) if sys.argv[4] else None,
          "used": sys.argv[5], "unread": int(sys.argv[6]), "restored": r["blocks"] == 0})
print(json.dumps(d))
EOF
    log "$engine: fault $i $f ($id): $(cat "$dir/diff-$i.json")"
  done
  for p in $(pgrep -x opensm); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "-F $osm/opensm.conf" && kill "$p" 2>/dev/null
  done
  wait "$waiter" 2>/dev/null || true
  exec 7>&-
  stop_pid "$sim_pid"
}

# churn_rows: one row per OpenSM engine of the churn runs (DIR/churn.jsonl of each).
churn_rows() {
  local sm
  for sm in $sms; do
    is_fabricd "$sm" && continue
    python3 - "$work/$sm-churn/churn.jsonl" "$sm" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
if not rows:
    print("| OpenSM -R %s | n/a (no fault measured) | | | | | | | |" % sys.argv[2]); sys.exit(0)
b = [r["blocks"] for r in rows]
used = ",".join(sorted(set(r["used"] for r in rows)))
ms = [r["route_ms"] for r in rows if r["route_ms"] is not None]
unread = sum(r["unread"] for r in rows)
print("| OpenSM -R %s | %s | %d | %.1f | %d | %.1f | %.0f | %d/%d | %s |%s" % (
    sys.argv[2], used, len(rows), statistics.mean(b), max(b),
    statistics.mean(r["switches"] for r in rows), statistics.mean(r["entries"] for r in rows),
    sum(r["restored"] for r in rows), len(rows), "%.1f" % statistics.median(ms) if ms else "-",
    " (%d switch tables unreadable)" % unread if unread else ""))
EOF
  done
}

# run_sm DIR SM: one run of a manager on a fresh ibsim in DIR; sets up_ms, smps, used, name.
run_sm() {
  local dir=$1 sm=$2
  rm -rf "$dir"
  mkdir -p "$dir"
  start_ibsim "$dir"
  if is_fabricd "$sm"; then
    fabricd_variant "$sm"
    run_fabricd "$dir" "$fd_direct" "$fd_engine"
    # The entry of --sms (`fabricd`, `fabricd-direct`, `fabricd=ENGINE`, ...); the routing column
    # names the engine and the LMC.
    name=$sm
  else
    run_opensm "$dir" "$sm"
    name="OpenSM -R $sm"
  fi
}

# median_range VALUES...: "median (min-max)", or the value alone.
median_range() {
  printf '%s\n' "$@" | python3 -c '
import statistics, sys
v = sorted(float(x) for x in sys.stdin.read().split())
m = statistics.median(v)
print("%.0f" % m if len(v) == 1 else "%.0f (%.0f-%.0f)" % (m, v[0], v[-1]))'
}

# median_of VALUES...: the median, unrounded (for ratios).
median_of() {
  printf '%s\n' "$@" | python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.stdin.read().split()))'
}

# median_range_ms VALUES...: like median_range, with two decimals (routing times).
median_range_ms() {
  printf '%s\n' "$@" | python3 -c '
import statistics, sys
v = sorted(float(x) for x in sys.stdin.read().split())
m = statistics.median(v)
print("%.2f" % m if len(v) == 1 else "%.2f (%.2f-%.2f)" % (m, v[0], v[-1]))'
}

# attr_row FILE NAME: one row of the SMPs-by-attribute table from a smps-by-attr file.
attr_row() {
  python3 - "$1" "$2" <<'EOF'
import sys
names = {0x10: "NodeDesc", 0x11: "NodeInfo", 0x12: "SwitchInfo", 0x15: "PortInfo", 0x16: "P_KeyTable",
         0x17: "SLtoVL", 0x18: "VLArb", 0x19: "LFT", 0x1B: "MFT", 0x20: "SMInfo"}
count = {}
for line in open(sys.argv[1]):
    n, a = line.split()
    key = names.get(int(a, 16), "other")
    count[key] = count.get(key, 0) + int(n)
cols = list(names.values()) + ["other"]
print("| %s | %s |" % (sys.argv[2], " | ".join(str(count.get(c, 0)) for c in cols)))
EOF
}

churn_table() {
  echo "Churn of single cable faults (--fault-after, one at a time; OpenSM long-running with sweep_interval 1): LFT blocks of 64 LIDs that differ between the read-backs before and after the fault's re-sweep, over all switches; restored = the tables after ReLink equal the first ones; route ms = OpenSM's routing window of the fault's re-sweep:"
  echo
  echo "| SM | routing | faults | blocks mean | blocks max | switches mean | entries mean | restored | route ms (median) |"
  echo "|---|---|---|---|---|---|---|---|---|"
  churn_rows
}

if [ -n "$faults" ]; then
  for sm in $sms; do
    is_fabricd "$sm" && continue
    log "$sm: churn of $(echo $faults | wc -w) single cable faults"
    churn_opensm "$work/$sm-churn" "$sm"
  done
fi
if [ "$churn_only" -eq 1 ]; then
  [ -n "$faults" ] || die "--churn-only needs --fault-after"
  echo "Fabric \`$spec\`$([ "$remove_links" -gt 0 ] && echo ", $remove_links random inter-switch cables removed (seed $seed)"), $nodes end ports; ibsim 0.10, $(opensm --version 2>/dev/null | grep -m1 -o 'OpenSM [0-9.]*')."
  echo
  churn_table
  exit 0
fi

rows=()
route_rows=()
engine_rows=()
attr_rows=()
vl_rows=()
for sm in $sms; do
  times=()
  route_times=()
  engine_times=()
  vl_times=()
  # Work directory of the entry (a fabricd variant's `=ENGINE` may hold ':').
  sm_dir=$(printf '%s' "$sm" | tr -c 'A-Za-z0-9_.-' '_')
  fd=0
  if is_fabricd "$sm"; then
    fd=1
    fabricd_variant "$sm"
  fi
  for r in $(seq 1 "$repeat"); do
    dir=$work/$sm_dir
    sim_verbose=0
    # fabricd's re-sweeps (as OpenSM's SIGHUPs): --repeat of them, in the last timed run.
    fd_resweeps=0
    [ "$fd" -eq 0 ] || [ "$r" -ne "$repeat" ] || fd_resweeps=$repeat
    run_sm "$dir" "$sm"
    fd_resweeps=0
    times+=("$up_ms")
    route_times+=("$route_ms")
    [ "$fd" -eq 1 ] && engine_times+=("$engine_ms")
    if [ "$fd" -eq 1 ]; then
      [ "$vl_ms" = - ] || vl_times+=("$vl_ms")
      log "$sm: run $r/$repeat: programmed after $up_ms ms, escape VL ready after $vl_ms ms"
    else
      log "$sm: run $r/$repeat: programmed after $up_ms ms"
    fi
    # The last run's simulator stays up for the read-back.
    [ "$r" -eq "$repeat" ] || stop_pid "$sim_pid"
  done
  log "$sm: reading the tables back"
  read_back "$dir"
  resweep="-"
  if [ "$fd" -eq 0 ]; then
    resweep_opensm "$dir" "$sm"
    resweep="$resweep_ms"
    log "$sm: routing computation on a re-sweep (no LFT change): $resweep_ms ms"
  else
    resweep="$fd_resweep_ms"
  fi
  stop_pid "$sim_pid"
  smps=-1
  smps_vl=-1
  # fabricd's own counters of the last timed run (quiet ibsim) unless the count run replaces them.
  own=("${own_smps:-}" "${own_smps_vl:-}")
  if [ "$count" -eq 1 ]; then
    sim_verbose=1
    run_sm "$work/$sm_dir-count" "$sm"
    stop_pid "$sim_pid"
    if [ "$fd" -eq 1 ]; then
      cp "$work/$sm_dir-count/smps-by-attr.programmed" "$dir/smps-by-attr"
      [ "$fd_direct" -eq 1 ] || cp "$work/$sm_dir-count/smps-by-attr" "$dir/smps-by-attr.escape-vl"
      own=("$own_smps" "$own_smps_vl")
      log "$sm: $smps SMPs to programmed ($own_smps by its own count), $smps_vl once the escape VL is ready ($own_smps_vl)"
    else
      cp "$work/$sm_dir-count/smps-by-attr" "$dir/smps-by-attr"
      log "$sm: $smps SMPs"
    fi
  fi
  up_ms=$(median_range "${times[@]}")
  route_rows+=("$name|$used|$(median_range_ms "${route_times[@]}")|$(median_of "${route_times[@]}")|$resweep")
  if [ "$fd" -eq 1 ]; then
    engine_rows+=("$name, engines only|${fd_engine:-dmodc} base$([ "$fd_direct" -eq 1 ] || echo " + Up*/Down* escape")$(case "$fd_engine" in dfsssp|layered*) echo " (VL layering not included)" ;; esac)|$(median_range_ms "${engine_times[@]}")|$(median_of "${engine_times[@]}")|-")
    [ "$fd_direct" -eq 1 ] || vl_rows+=("| $name | $up_ms | $(median_range "${vl_times[@]}") | $([ "$smps" -ge 0 ] && echo "$smps" || echo -) | ${own[0]} | $([ "$smps_vl" -ge 0 ] && echo "$smps_vl" || echo -) | ${own[1]} |")
  fi
  # OpenSM's VLs, or fabricd's VLs in use: its layers (plus the escape VL at LMC 1), as data_vls
  # when it has no layering (Status of its first generation).
  vl_json=$(if [ "$fd" -eq 1 ]; then python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
l, d = s.get("vl_layers", 0), s.get("data_vls", 0)
used = (l + (1 if s.get("lmc", 1) >= 1 else 0)) if l else d
print(json.dumps({"vls": used, "layers": l, "data_vls": d, "lmc": s.get("lmc")}))' "$dir/status.json"
    else printf '{"vls": %s}' "$([[ "$vls" =~ ^[0-9]+$ ]] && echo "$vls" || echo null)"; fi)
  rows+=("$(python3 - "$dir/metrics.json" "$name" "$used" "$up_ms" "$smps" "$a2a" "$unread" "$vls" "$json_out" "$sm" "$spec" "$remove_links" "$(median_of "${route_times[@]}")" "$resweep" "$vl_json" "$([ "$fd" -eq 1 ] && median_of "${engine_times[@]}" || echo -)" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
name, used, ms, smps, a2a = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6] == "1"
unread = int(sys.argv[7])
vls = sys.argv[8]
valid = "yes" if m["valid"] else "no (%d pairs)" % m["unreachable_pairs"]
if unread:
    valid += ", %d switch tables not readable" % unread
print("| %s | %s | %s | %s | %s | %d | %s | %d | %.1f | %.1f | %s | %.3f |" % (
    name, used, vls, ms, str(smps) if smps >= 0 else "-", m["top_lid"], valid,
    m["mu_sp"], m["mu_rp"]["median"], m["mu_rp"]["q1"], str(m["mu_a2a"]) if a2a else "-", m["nu"]))
if sys.argv[9]:
    num = lambda x: None if x in ("", "-") else float(x)
    row = {"fabric": sys.argv[11], "removed_links": int(sys.argv[12]), "sm": sys.argv[10], "name": name,
           "used": used, "vls_text": vls, "valid": bool(m["valid"]) and unread == 0,
           "unreachable_pairs": m["unreachable_pairs"], "unread_switches": unread,
           "mu_sp": m["mu_sp"], "mu_rp_median": m["mu_rp"]["median"], "mu_rp_q1": m["mu_rp"]["q1"],
           "mu_a2a": m["mu_a2a"] if a2a else None, "nu": m["nu"], "ms_to_programmed": ms,
           "route_ms": num(sys.argv[13]), "resweep_ms": num(sys.argv[14]), "engine_ms": num(sys.argv[16])}
    row.update(json.loads(sys.argv[15]))
    with open(sys.argv[9], "a") as f:
        f.write(json.dumps(row) + "\n")
EOF
)")
  [ "$count" -eq 1 ] || continue
  attr_rows+=("$(attr_row "$dir/smps-by-attr" "$name")")
  if [ "$fd" -eq 1 ] && [ "$fd_direct" -eq 0 ]; then
    attr_rows+=("$(attr_row "$dir/smps-by-attr.escape-vl" "fabricd, to escape VL ready")")
  fi
done

echo "Fabric \`$spec\`$([ "$remove_links" -gt 0 ] && echo ", $remove_links random inter-switch cables removed (seed $seed)"), $nodes end ports; ibsim 0.10, $(opensm --version 2>/dev/null | grep -m1 -o 'OpenSM [0-9.]*'); mu_rp over $rp random permutations."
echo
echo "| SM | routing | VLs | ms to programmed$([ "$repeat" -gt 1 ] && echo " (median of $repeat, min-max)") | SMPs | top LID | valid | mu_sp | mu_rp median | mu_rp q1 | mu_a2a | nu |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Routing computation. OpenSM: its log from \"building routing with\" to \"tables configured\", in the timed runs (the LFT Set MADs of a first sweep are queued inside that window) and on a re-sweep after SIGHUP of the same tables (no MAD: the computation alone). fabricd: \`compute_ms\` of its first generation (topology, ranking, LIDs, base and escape routing, validity check, VL layering, multicast, partitions, diff; uploads are outside), on a re-sweep the median \`compute_ms\` of $repeat \`fabricctl reroute --wait\` (a full recomputation of the unchanged fabric, in the last timed run), and its engines alone (\`route_ms\` of the Metrics RPC: the engine for the base LIDs plus Up*/Down* for the escape LIDs). Ratios against the first fabricd variant of --sms: its first-generation compute_ms median (first sweep / first generation, re-sweep / first generation) and its re-sweep compute_ms (re-sweep / re-sweep, like for like):"
echo
echo "| SM | routing | route ms, first sweep$([ "$repeat" -gt 1 ] && echo " (median of $repeat, min-max)") | route ms, re-sweep | ratio first sweep | ratio re-sweep | ratio re-sweep / re-sweep |"
echo "|---|---|---|---|---|---|---|"
fd_route=$(printf '%s\n' "${route_rows[@]}" | awk -F'|' '$1 ~ /^fabricd/ { print $4; exit }')
fd_resweep=$(printf '%s\n' "${route_rows[@]}" | awk -F'|' '$1 ~ /^fabricd/ { print $5; exit }')
for r in "${route_rows[@]}" "${engine_rows[@]}"; do
  IFS='|' read -r rn ru rms rmed rre <<<"$r"
  ratio() { python3 -c 'import sys; a, b = sys.argv[1], sys.argv[2]; print("%.1f" % (float(a) / float(b)) if a not in ("-", "") and b not in ("-", "") and float(b) > 0 else "-")' "$1" "$2"; }
  echo "| $rn | $ru | $rms | $rre | $(ratio "$rmed" "${fd_route:-}") | $(ratio "$rre" "${fd_route:-}") | $(ratio "$rre" "${fd_resweep:-}") |"
done
if [ "${#vl_rows[@]}" -gt 0 ]; then
  echo
  echo "fabricd's escape VL (SL-to-VL tables, programmed in the background after the first generation):"
  echo
  echo "| SM | ms to programmed | ms to escape VL ready | SMPs to programmed (ibsim) | (fabricd's count at commit) | SMPs to escape VL ready (ibsim) | (fabricd's count) |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${vl_rows[@]}"
fi
if [ -n "$faults" ]; then
  echo
  churn_table
fi
[ "$count" -eq 1 ] || exit 0
echo
echo "SMPs by attribute (Get and Set; fabricd: until programmed, SL-to-VL in the second table):"
echo
echo "| SM | NodeDesc | NodeInfo | SwitchInfo | PortInfo | P_KeyTable | SLtoVL | VLArb | LFT | MFT | SMInfo | other |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${attr_rows[@]}"
