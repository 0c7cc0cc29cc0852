#!/usr/bin/env bash
# Degradation study (thesis ch. 5, §5.2; issue 16 deliverable 5): every routing engine on a PGFT
# under progressive removal of inter-switch cables or of non-leaf switches, a few seeds per step.
# For each (step, engine): `fabricctl analyze FILE --engine E --rp RP --seed SEED --no-a2a --json`
# on `fabricctl topo gen SPEC --remove-links N|--remove-switches N --seed SEED` (the same seed picks
# the removed cables/switches and the random permutations; seeded engines get `ENGINE:SEED`).
# Prints a Markdown table: mu_sp (mean over the seeds, worst seed) and mu_rp(RP) median, q1 and
# q39 (means over the seeds), validity, deadlock freedom, Up*/Down* fallback, route time.
# An engine that refuses a fabric (RoutingError::Unsupported, Dmodk on a degraded PGFT, ...) gets
# "n/a (reason)" in its row; the study goes on.
#
# Usage: tests/degradation-study.sh [--spec SPEC] [--engines "dmodc updown ..."]
#            [--mode links|switches] [--steps "0 1 2 5 10"] [--seeds "1 2 3"] [--rp N]
#            [--bin-dir DIR] [--cost]
#   --spec     fabric (fabricctl topo gen notation); default the thesis' 8 640-node
#              PGFT(3;24,12,30;1,12,12;1,2,1)
#   --engines  engines to run (default: every engine of ENGINE_NAMES: dmodc dmodc-lb dmodk
#              updown updown-random bfs-dmodc bfs-random ftree ftree2 ftree-random bfs-ftree
#              bfs-ftree2 bfs-ftree-random randsp smodk sssp pqft; the thesis' BFS-Dmodc and
#              BFS-Random are bfs-dmodc and bfs-random, its UpDn OpenSM's updn, like `updown`)
#   --mode     links: remove STEP % of the inter-switch cables; switches: STEP % of the non-leaf
#              switches (default links)
#   --steps    percentages (default "0 1 2 5 10" for links, "0 1 2 5" for switches)
#   --seeds    seeds per step (default "1 2 3"); step 0 is the same fabric for every seed, so it
#              runs only the first seed unless the engine is seeded
#   --rp       random permutations for mu_rp (default 1000)
#   --bin-dir  directory holding fabricctl (default: build it in release)
#   --cost     print the wall time of each analyze on stderr
# The old positional form `tests/degradation-study.sh SPEC RP` is still accepted.
set -euo pipefail
cd "$(dirname "$0")/.."

spec='PGFT(3;24,12,30;1,12,12;1,2,1)'
engines="dmodc dmodc-lb dmodk updown updown-random bfs-dmodc bfs-random ftree ftree2 ftree-random bfs-ftree bfs-ftree2 bfs-ftree-random randsp smodk sssp pqft"
mode=links
steps=""
seeds="1 2 3"
rp=1000
bin_dir=""
cost=0
if [ $# -ge 1 ] && [ "${1#--}" = "$1" ]; then
  spec=$1
  rp=${2:-$rp}
  shift $#
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --spec) spec=$2; shift 2 ;;
    --engines) engines=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --rp) rp=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --cost) cost=1; shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "degradation-study: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$mode" in
  links) steps=${steps:-"0 1 2 5 10"}; what="inter-switch cables"; flag=--remove-links ;;
  switches) steps=${steps:-"0 1 2 5"}; what="non-leaf switches"; flag=--remove-switches ;;
  *) echo "degradation-study: --mode links or switches" >&2; exit 2 ;;
esac

if [ -z "$bin_dir" ]; then
  cargo build --release -q -p fabricctl
  bin_dir=${CARGO_TARGET_DIR:-target}/release
fi
bin=$bin_dir/fabricctl
[ -x "$bin" ] || { echo "degradation-study: $bin not found" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$bin" topo gen "$spec" -o "$tmp/full.topo"
read -r cables nonleaf nodes < <("$bin" topo info "$tmp/full.topo" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
print(v["links"], v["switches"] - v["leaves"], v["nodes"])')
total=$([ "$mode" = links ] && echo "$cables" || echo "$nonleaf")
first_seed=${seeds%% *}
echo "Fabric \`$spec\` ($nodes end ports, $cables inter-switch cables, $nonleaf non-leaf switches); $what removed at random (\`fabricctl topo gen $flag N --seed S\`); seeds $seeds per step (step 0: one run unless the engine is seeded); mu_rp over $rp random permutations (seed S)."
echo
echo "| removed | engine | mu_sp mean | mu_sp worst | mu_rp median | mu_rp q1 | mu_rp q39 | valid | deadlock-free | fallback | route ms |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for pct in $steps; do
  n=$(( total * pct / 100 ))
  [ "$pct" != 0 ] && [ "$n" -eq 0 ] && n=1
  for engine in $engines; do
    : >"$tmp/rows"
    : >"$tmp/errs"
    for seed in $seeds; do
      seeded=$engine
      case "$engine" in
        updown-random|bfs-random|ftree-random|bfs-ftree-random|randsp) seeded="$engine:$seed" ;;
        *) [ "$n" -eq 0 ] && [ "$seed" != "$first_seed" ] && continue ;;
      esac
      f="$tmp/d-$pct-$seed.topo"
      if [ "$n" -gt 0 ]; then
        [ -s "$f" ] || "$bin" topo gen "$spec" -o "$f" "$flag" "$n" --seed "$seed"
      else
        f="$tmp/full.topo"
      fi
      t0=$(date +%s%N)
      if "$bin" analyze "$f" --engine "$seeded" --rp "$rp" --seed "$seed" --no-a2a --json >"$tmp/out" 2>"$tmp/err"; then
        tr -d '\n' <"$tmp/out" >>"$tmp/rows"
        echo >>"$tmp/rows"
      else
        # The reason without the "fabricctl: " prefix, on one line.
        sed -e 's/^fabricctl: //' "$tmp/err" | grep -v '^\s*$' | tail -1 >>"$tmp/errs"
      fi
      [ "$cost" -eq 0 ] || echo "degradation-study: $pct % $engine seed $seed: $(( ($(date +%s%N) - t0) / 1000000 )) ms" >&2
    done
    python3 - "$pct" "$engine" "$n" "$tmp/rows" "$tmp/errs" <<'EOF'
import json, sys
pct, engine, n, rows, errs = sys.argv[1:6]
v = [json.loads(l) for l in open(rows) if l.strip()]
e = [l.strip() for l in open(errs) if l.strip()]
label = "%s %% (%s)" % (pct, n)
if not v:
    reason = e[0] if e else "no result"
    reason = reason if len(reason) <= 100 else reason[:100] + "…"
    print("| %s | %s | n/a (%s) | | | | | | | | |" % (label, engine, reason.replace("|", "/")))
    sys.exit(0)
def mean(f):
    return sum(f(x) for x in v) / len(v)
sp = mean(lambda x: x["mu_sp"])
worst = max(x["mu_sp"] for x in v)
med = mean(lambda x: x["mu_rp"]["median"])
q1 = mean(lambda x: x["mu_rp"]["q1"])
q39 = mean(lambda x: x["mu_rp"]["q39"])
valid = "yes" if all(x["valid"] for x in v) else "no (%d/%d)" % (sum(not x["valid"] for x in v), len(v))
dlf = "yes" if all(x["deadlock_free"] for x in v) else "no (%d/%d)" % (sum(not x["deadlock_free"] for x in v), len(v))
fb = [x["routing_fallback"]["fallback"] for x in v if x.get("routing_fallback") and x["routing_fallback"]["fallback"] != "none"]
fallback = "-" if not fb else "%d/%d %s" % (len(fb), len(v), ",".join(sorted(set(fb))))
ms = mean(lambda x: x["route_ms"])
note = "" if not e else " (%d seed(s) n/a: %s)" % (len(e), e[0].replace("|", "/"))
print("| %s | %s%s | %.1f | %d | %.1f | %.1f | %.1f | %s | %s | %s | %.0f |" % (label, engine, note, sp, worst, med, q1, q39, valid, dlf, fallback, ms))
EOF
  done
done
