#!/usr/bin/env bash
# Degradation study (routing-core issue): Dmodc versus Up*/Down*-random on a 3-level PGFT of
# 3 456 end nodes with 0, 1, 2, 5 and 10 % of the inter-switch cables removed, 5 seeds each.
# Prints a Markdown table of mu_sp and mu_rp(1000) (median, q1, q39), averaged over the seeds,
# plus the worst seed. Usage: tests/degradation-study.sh [SPEC] [RP] > table.md
set -euo pipefail
cd "$(dirname "$0")/.."
spec=${1:-'PGFT(3;12,12,24;1,12,12;1,1,1)'}
rp=${2:-1000}
cargo build --release -q -p fabricctl
bin=${CARGO_TARGET_DIR:-target}/release/fabricctl
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$bin" topo gen "$spec" -o "$tmp/full.topo"
cables=$("$bin" topo info "$tmp/full.topo" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["links"])')
echo "Fabric \`$spec\`, $cables inter-switch cables; mu_rp over $rp random permutations; 5 seeds per row."
echo
echo "| removed | engine | mu_sp mean | mu_sp worst | mu_rp median (mean) | mu_rp q1 | mu_rp q39 | valid | deadlock-free | route ms (mean) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for pct in 0 1 2 5 10; do
  n=$(( cables * pct / 100 ))
  for engine in dmodc updown-random; do
    rows=""
    for seed in 1 2 3 4 5; do
      f="$tmp/d.topo"
      if [ "$n" -gt 0 ]; then "$bin" topo gen "$spec" -o "$f" --remove-links "$n" --seed "$seed"; else cp "$tmp/full.topo" "$f"; fi
      rows+=$("$bin" analyze "$f" --engine "$engine" --rp "$rp" --seed "$seed" --no-a2a --json | tr -d '\n')
      rows+=$'\n'
    done
    printf '%s' "$rows" | python3 -c '
import json, sys
pct, engine, n = sys.argv[1], sys.argv[2], sys.argv[3]
v = [json.loads(l) for l in sys.stdin if l.strip()]
def mean(f):
    return sum(f(x) for x in v) / len(v)
sp = mean(lambda x: x["mu_sp"])
worst = max(x["mu_sp"] for x in v)
med = mean(lambda x: x["mu_rp"]["median"])
q1 = mean(lambda x: x["mu_rp"]["q1"])
q39 = mean(lambda x: x["mu_rp"]["q39"])
valid = all(x["valid"] for x in v)
dlf = all(x["deadlock_free"] for x in v)
ms = mean(lambda x: x["route_ms"])
print("| %s %% (%s) | %s | %.1f | %d | %.1f | %.1f | %.1f | %s | %s | %.0f |" % (pct, n, engine, sp, worst, med, q1, q39, valid, dlf, ms))
' "$pct" "$engine" "$n"
  done
done
