# Shared by the by-hand measurement scripts (tests/opensm-compare.sh, tests/sa-bench.sh):
# `. tests/lib-work.sh` after `keep` is set, then `work_dir PREFIX` sets `work` (the `--keep`
# directory, or a fresh temporary one removed on exit) and arms the clean-up: every process id
# appended to `pids` is stopped when the script exits.

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

# work_dir PREFIX: sets `work` and arms `cleanup` on exit (and on INT/TERM).
work_dir() {
  if [ -n "$keep" ]; then
    mkdir -p "$keep"
    work=$(cd "$keep" && pwd)
  else
    work=$(mktemp -d "/tmp/$1.XXXXXX")
  fi
  trap cleanup EXIT
  trap 'exit 130' INT TERM
}
