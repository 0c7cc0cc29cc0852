# Shared by the by-hand measurement scripts (tests/opensm-compare.sh, tests/sa-bench.sh,
# tests/mcast-bench.sh):
# `. tests/lib-work.sh NAME` after the arguments are read. `log`/`die` print as NAME;
# `require_sim_tools TOOL...` checks the umad2sim shim (sets `shim`) and the tools;
# `work_dir` sets `work` (the `--keep` directory, or a fresh temporary one removed on exit) and
# arms the clean-up: every process id appended to `pids` is stopped when the script exits.
# The simulator helpers (sa-bench.sh, mcast-bench.sh): `start_ibsim`, `stop_ibsim`, `under_sim`,
# `start_opensm`, `start_fabricd`, `generation`, `wait_sa`; they read `deadline`, `host` (the
# manager's node), `tool_host`, `fabricd` and `fabricctl` (the binaries).

script_name=$1
log() { echo "$script_name: $*" >&2; }
die() { log "$*"; exit 1; }

# require_sim_tools TOOL...: the shim and every TOOL, or a clear error naming the package.
require_sim_tools() {
  shim=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
  [ -f "$shim" ] || die "$shim not found (apt-get install libumad2sim0 ibsim-utils)"
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 \
      || die "$t not found (apt-get install ibsim-utils opensm infiniband-diags python3)"
  done
}

pids=()

cleanup() {
  local p
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  if [ -z "$keep" ]; then rm -rf "$work"; fi
}

# work_dir: sets `work` and arms `cleanup` on exit (and on INT/TERM).
work_dir() {
  if [ -n "$keep" ]; then
    mkdir -p "$keep"
    work=$(cd "$keep" && pwd)
  else
    work=$(mktemp -d "/tmp/$script_name.XXXXXX")
  fi
  trap cleanup EXIT
  trap 'exit 130' INT TERM
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# stop_pid PID: stops one of our processes and forgets it.
stop_pid() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  local rest=() p
  for p in "${pids[@]}"; do
    [ "$p" = "$1" ] || rest+=("$p")
  done
  pids=("${rest[@]}")
}

# start_ibsim DIR NET: ibsim on NET (sized for it) with its console on a fifo held open in
# `console_fd`; sets `sock` (unique per script, process and DIR) and `sim_pid`.
start_ibsim() {
  local dir=$1 net=$2
  sock="$script_name-$$-$(basename "$dir")"
  read -r nnodes nswitches nports < <(awk '
    /^Switch[ \t]/ { n++; s++; p += $2 + 1 }
    /^(Ca|Hca|Rt)[ \t]/ { n++; p += $2 }
    END { print n + 16, s + 16, p + 256 }' "$net")
  mkfifo "$dir/console"
  (cd "$dir" && IBSIM_SOCKNAME=$sock exec ibsim -s -N "$nnodes" -S "$nswitches" -P "$nports" "$net" \
    <"$dir/console" >ibsim.log 2>&1) &
  sim_pid=$!
  pids+=("$sim_pid")
  # Hold the console open for the simulator's lifetime.
  exec {console_fd}>"$dir/console"
  local t0
  t0=$(now_ms)
  until grep -q "Network simulator ready." "$dir/ibsim.log" 2>/dev/null; do
    kill -0 "$sim_pid" 2>/dev/null || die "ibsim exited: $(tail -5 "$dir/ibsim.log")"
    [ $(($(now_ms) - t0)) -lt 60000 ] || die "ibsim not ready after 60 s"
    sleep 0.05
  done
}

stop_ibsim() {
  exec {console_fd}>&-
  stop_pid "$sim_pid"
}

# under_sim DIR HOST CMD...: CMD as a client of the simulator on node HOST, in DIR.
under_sim() {
  local dir=$1 on=$2
  shift 2
  (cd "$dir" && IBSIM_SOCKNAME=$sock SIM_HOST=$on LD_PRELOAD=$shim exec timeout "$deadline" "$@")
}

# start_opensm DIR [SED_EXPR...]: OpenSM master on $host, its generated config edited by the
# given sed expressions too (e.g. "s|^lmc .*|lmc 1|"); waits for SUBNET UP; sets `sm_pid` and
# `version`.
start_opensm() {
  local dir=$1 osm=$1/osm e
  shift
  mkdir -p "$osm"
  opensm -c "$osm/opensm.conf" >/dev/null 2>&1 || true
  [ -s "$osm/opensm.conf" ] || die "opensm -c did not write a config"
  local edits=(-e "s|^log_file .*|log_file $osm/opensm.log|"
    -e "s|^accum_log_file .*|accum_log_file FALSE|"
    -e "s|^force_log_flush .*|force_log_flush TRUE|"
    -e "s|^dump_files_dir .*|dump_files_dir $osm/|"
    -e "s|^sm_priority .*|sm_priority 15|")
  for e in "$@"; do edits+=(-e "$e"); done
  sed -i "${edits[@]}" "$osm/opensm.conf"
  (cd "$osm" && IBSIM_SOCKNAME=$sock SIM_HOST=$host LD_PRELOAD=$shim OSM_CACHE_DIR=$osm \
    exec opensm -F "$osm/opensm.conf" >"$osm/stdout" 2>&1) &
  sm_pid=$!
  pids+=("$sm_pid")
  local t0
  t0=$(now_ms)
  until grep -q "SUBNET UP" "$osm/opensm.log" 2>/dev/null; do
    kill -0 "$sm_pid" 2>/dev/null || die "opensm exited: $(tail -5 "$osm/stdout")"
    [ $(($(now_ms) - t0)) -lt $((deadline * 1000)) ] || die "opensm: no SUBNET UP within $deadline s"
    sleep 0.05
  done
  version="$(opensm --version 2>/dev/null | grep -m1 'OpenSM' | tr -d '\r')"
  log "$version up after $(($(now_ms) - t0)) ms"
}

# wait_sa DIR: until the SA answers `saquery SMIR` from $tool_host (30 s at most).
wait_sa() {
  local dir=$1 t0
  t0=$(now_ms)
  until under_sim "$dir" "$tool_host" saquery SMIR 2>/dev/null | grep -q "SMInfoRecord"; do
    [ $(($(now_ms) - t0)) -lt 30000 ] || die "the SA does not answer saquery SMIR within 30 s"
    sleep 0.2
  done
}

# start_fabricd DIR: fabricd master on $host (umad driver), waits for its first commit; sets
# `sm_pid` and `version`.
start_fabricd() {
  local dir=$1
  cat >"$dir/fabricd.toml" <<'EOF'
[log]
level = "info"
timestamps = true

[driver]
kind = "umad"

[driver.umad]
# ibsim does not simulate link training: re-enable ports straight to LinkUp.
enable_phys_state = 5

[metrics]
random_perms = 0
shifts = false
all_to_all = false
EOF
  (cd "$dir" && IBSIM_SOCKNAME=$sock SIM_HOST=$host LD_PRELOAD=$shim exec "$fabricd" --config fabricd.toml \
    --state-dir state --socket "$dir/s.sock" >fabricd.log 2>&1) &
  sm_pid=$!
  pids+=("$sm_pid")
  local t0
  t0=$(now_ms)
  until [ "$(generation "$dir")" -ge 1 ]; do
    kill -0 "$sm_pid" 2>/dev/null || die "fabricd exited: $(tail -5 "$dir/fabricd.log")"
    [ $(($(now_ms) - t0)) -lt $((deadline * 1000)) ] || die "fabricd: no generation within $deadline s"
    sleep 0.05
  done
  version="fabricd $(git describe --always --dirty 2>/dev/null || echo '?')"
  log "fabricd up after $(($(now_ms) - t0)) ms"
}

# generation DIR: fabricd's committed generation once idle (0 when it does not answer yet).
generation() {
  "$fabricctl" --socket "$1/s.sock" status --json 2>/dev/null \
    | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s.get("generation", 0) if s.get("phase") == "idle" else 0)' \
    2>/dev/null || echo 0
}
