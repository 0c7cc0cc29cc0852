# Shared by the by-hand measurement scripts (tests/opensm-compare.sh, tests/sa-bench.sh):
# `. tests/lib-work.sh NAME` after the arguments are read. `log`/`die` print as NAME;
# `require_sim_tools TOOL...` checks the umad2sim shim (sets `shim`) and the tools;
# `work_dir` sets `work` (the `--keep` directory, or a fresh temporary one removed on exit) and
# arms the clean-up: every process id appended to `pids` is stopped when the script exits.

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
