#!/usr/bin/env bash
# Churn study (issue 16, deliverable 4 "minimal churn"): LFT blocks of 64 entries rewritten by a
# single cable fault, for every routing engine, next to OpenSM's engines on the same faults.
#
# fabricd's engines: `fabricctl churn FILE --engine E --faults N --seed S --lmc L --json` routes the
# intact fabric, then for each of N random inter-switch cables (round-robin over the cable
# classes leaf–level 1 and level 1–level 2, uniform within a class) the fabric with that cable's
# link down, ranked again, with the same LID plan, as fabricd does on a fault (route_all_checked:
# base LIDs by the engine, escape LIDs by Up*/Down* with LMC 1, Up*/Down* repair); the churn is
# the number of blocks that differ over all switches (what fabricd's update writes). Reported
# for LMC 0 (base LIDs only: the engine's own churn, and OpenSM's default) and LMC 1 (fabricd's
# default: base and escape LIDs interleave, every block holds both). "forced" is the number of
# blocks of the cable's two switches that held an entry on the dead port (they must change).
#
# OpenSM: `tests/opensm-compare.sh --fault-after "GUID[PORT] ..." --churn-only` on the first K of
# the same faults (ibsim `Unlink`, OpenSM re-sweep, tables read back with ibroute before and
# after), with fabricd's engines measured on exactly those K faults (LMC 0) next to them.
#
# Usage: tests/churn-study.sh [--spec SPEC] [--engines "dmodc ..."] [--faults N] [--seed S]
#            [--lmcs "0 1"] [--opensm "ftree updn dfsssp"] [--opensm-faults K]
#            [--opensm-spec SPEC] [--timeout SECONDS] [--bin-dir DIR]
#   --spec          fabric of the fabricd table (default the 8 640-node PGFT(3;24,12,30;1,12,12;1,2,1))
#   --engines       fabricd engines (default all 15 names)
#   --faults        random single-cable faults per engine (default 20)
#   --opensm        OpenSM engines ("" to skip OpenSM; default "ftree updn dfsssp")
#   --opensm-faults faults measured under OpenSM (default 4: the first 4 of the same draw)
#   --opensm-spec   fabric of the OpenSM comparison (default --spec; a smaller one if OpenSM under
#                   ibsim is too slow on it: fabricd's engines are then measured on it too)
#   --timeout       per-step deadline of opensm-compare.sh (default 1800 s)
set -euo pipefail
cd "$(dirname "$0")/.."

spec='PGFT(3;24,12,30;1,12,12;1,2,1)'
engines="dmodc dmodk updown updown-random ftree ftree2 ftree-random bfs-ftree bfs-ftree2 bfs-ftree-random randsp smodk sssp pqft dmodc-lb"
faults=20
seed=1
lmcs="0 1"
opensm="ftree updn dfsssp"
ofaults=4
ospec=""
deadline=1800
bin_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --spec) spec=$2; shift 2 ;;
    --engines) engines=$2; shift 2 ;;
    --faults) faults=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --lmcs) lmcs=$2; shift 2 ;;
    --opensm) opensm=$2; shift 2 ;;
    --opensm-faults) ofaults=$2; shift 2 ;;
    --opensm-spec) ospec=$2; shift 2 ;;
    --timeout) deadline=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "churn-study: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
ospec=${ospec:-$spec}

if [ -z "$bin_dir" ]; then
  cargo build --release -q -p fabricctl
  bin_dir=${CARGO_TARGET_DIR:-target}/release
fi
bin_dir=$(cd "$bin_dir" && pwd)
bin=$bin_dir/fabricctl
[ -x "$bin" ] || { echo "churn-study: $bin not found" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# table FILE ENGINE...: one row per engine of `fabricctl churn FILE` with the remaining arguments
# (after --); n/a (reason) when the engine refuses the fabric.
table() {
  local file=$1 engine
  shift
  local engs=()
  while [ "$1" != -- ]; do engs+=("$1"); shift; done
  shift
  for engine in "${engs[@]}"; do
    if "$bin" churn "$file" --engine "$engine" "$@" --json >"$tmp/out" 2>"$tmp/err"; then
      python3 - "$tmp/out" "$engine" <<'EOF'
import json, statistics, sys
v = json.load(open(sys.argv[1]))
rows = v["faults"]
def cls(r):
    return "L%s–L%s" % (r["cable"]["lo"]["level"], r["cable"]["hi"]["level"])
by = {}
for r in rows:
    by.setdefault(cls(r), []).append(r["blocks"])
per = ", ".join("%s %.0f / %d" % (k, statistics.mean(b), max(b)) for k, b in sorted(by.items()))
fb = sum(r["fallback"] != "none" for r in rows)
print("| %s | %d | %.1f | %d | %s | %.1f | %.0f | %.1f | %.2f %% | %s |" % (
    sys.argv[2], v["lmc"], v["blocks_mean"], v["blocks_max"], per, v["switches_mean"], v["entries_mean"],
    v["forced_blocks_mean"], 100.0 * v["blocks_mean"] / v["total_blocks"], "-" if fb == 0 else "%d/%d" % (fb, len(rows))))
EOF
    else
      printf '| %s | | n/a (%s) | | | | | | | |\n' "$engine" "$(sed -e 's/^fabricctl: //' "$tmp/err" | grep -v '^\s*$' | tail -1 | tr '|' '/' | cut -c1-100)"
    fi
  done
}

header='| engine | LMC | blocks mean | blocks max | per cable class: mean / max | switches mean | entries mean | forced blocks mean | share of all blocks | Up*/Down* fallback |'
rule='|---|---|---|---|---|---|---|---|---|---|'

"$bin" topo gen "$spec" -o "$tmp/full.topo"
read -r nodes nsw < <("$bin" topo info "$tmp/full.topo" --json | python3 -c 'import json,sys; v=json.load(sys.stdin); print(v["nodes"], v["switches"])')
echo "Churn of single cable faults on \`$spec\` ($nodes end ports, $nsw switches): $faults random inter-switch cables (seed $seed, alternating cable classes), each failed alone; \`fabricctl churn\` (LIDs kept, ranking and checked routing as fabricd does); blocks of 64 LFT entries that differ over all switches."
echo
echo "$header"
echo "$rule"
for lmc in $lmcs; do
  table "$tmp/full.topo" $engines -- --faults "$faults" --seed "$seed" --lmc "$lmc"
done

[ -n "$opensm" ] || exit 0
if [ "$ospec" != "$spec" ]; then
  "$bin" topo gen "$ospec" -o "$tmp/osm.topo"
else
  cp "$tmp/full.topo" "$tmp/osm.topo"
fi
list=$("$bin" churn "$tmp/osm.topo" --faults "$ofaults" --seed "$seed" --list \
  | python3 -c 'import json,sys; print(" ".join("%s[%d]" % (c["lo"]["guid"], c["lo"]["port"]) for c in json.load(sys.stdin)))')
echo
echo "Same $ofaults faults ($list) on \`$ospec\`: fabricd's engines (LMC 0, as OpenSM) and OpenSM's (tests/opensm-compare.sh --fault-after ... --churn-only):"
echo
echo "$header"
echo "$rule"
fargs=()
for f in $list; do fargs+=(--fault "$f"); done
table "$tmp/osm.topo" $engines -- "${fargs[@]}" --lmc 0
echo
tests/opensm-compare.sh --spec "$ospec" --sms "$opensm" --fault-after "$list" --churn-only --bin-dir "$bin_dir" \
  --timeout "$deadline"
