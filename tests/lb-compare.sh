#!/usr/bin/env bash
# Load-aware Dmodc (dmodc-lb) against Dmodc (issue 16, deliverable 3): the acceptance table.
#
# For PGFT(3;18,18,24;1,18,18;1,1,1) (7 776 nodes) with 5 % of the inter-switch cables removed
# (`fabricctl topo gen SPEC --remove-links 777 --seed S`, seeds 1-5), 1 % removed (156, seed 1) and
# complete, and for the real JANUS dump, runs `fabricctl analyze FILE --engine E --rp N --json`
# for dmodc and dmodc-lb and prints one Markdown row per (fabric, engine): valid, deadlock-free,
# mu_sp, mu_rp median, P(mu >= 7) measured and the floor's estimate (fabric_metrics::rp_floor),
# mu_a2a, and the routing time of `analyze` (route_ms: ranking + LIDs + base + escape routing +
# validity fallback, one run each, same machine, same load).
#
# Usage: tests/lb-compare.sh [--bin-dir DIR] [--rp N] [--seeds "1 2 3 4 5"] [--no-a2a] [--keep DIR]
#   --bin-dir  directory holding fabricctl (default: build it in release)
#   --rp       random permutations (default 1000)
#   --seeds    seeds of the 5 % rows (default "1 2 3 4 5")
#   --no-a2a   skip mu_a2a
#   --keep     keep the generated topology files in DIR
# OpenSM dfsssp on the same files: tests/opensm-compare.sh --spec 'PGFT(3;18,18,24;1,18,18;1,1,1)'
# --remove-links 777 --seed S --sms dfsssp --rp 1000 (takes minutes to tens of minutes).
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir=""
rp=1000
seeds="1 2 3 4 5"
a2a=1
keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin-dir) bin_dir=$2; shift 2 ;;
    --rp) rp=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --no-a2a) a2a=0; shift ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lb-compare: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "$bin_dir" ]; then
  echo "lb-compare: building fabricctl (release)" >&2
  cargo build --release -q -p fabricctl
  bin_dir=${CARGO_TARGET_DIR:-target}/release
fi
fabricctl=$(cd "$bin_dir" && pwd)/fabricctl
[ -x "$fabricctl" ] || { echo "lb-compare: $fabricctl not found" >&2; exit 1; }

if [ -n "$keep" ]; then
  mkdir -p "$keep"
  work=$(cd "$keep" && pwd)
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

spec='PGFT(3;18,18,24;1,18,18;1,1,1)'
janus=crates/fabric-topology/tests/data/real/mlunacek-qdr-3xIS5600-214sw.ibnet
a2a_flag=()
[ "$a2a" -eq 1 ] || a2a_flag=(--no-a2a)

row() { # LABEL FILE ENGINE
  local label=$1 file=$2 engine=$3
  "$fabricctl" analyze "$file" --engine "$engine" --rp "$rp" --json "${a2a_flag[@]}" 2>/dev/null \
    | python3 -c '
import json, sys
label, engine, a2a = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
d = json.load(sys.stdin)
rp, fl = d["mu_rp"], d["mu_rp_floor"]
p7 = rp["p_at_least"].get("7")
f7 = fl["p_at_least"].get("7")
pct = lambda x: "-" if x is None else "%.1f %%" % (100 * x)
print("| %s | %s | %s | %s | %d | %g | %s | %s | %s | %.0f |" % (
    label, engine, d["valid"], d["deadlock_free"], d["mu_sp"], rp["median"], pct(p7), pct(f7),
    d["mu_a2a"] if a2a else "-", d["route_ms"]))
' "$label" "$engine" "$a2a"
}

echo "Fabric $spec; mu_rp over $rp random permutations; P(mu >= 7) measured and the floor's estimate."
echo
echo "| fabric | engine | valid | deadlock-free | mu_sp | mu_rp median | P(mu >= 7) | floor P(mu >= 7) | mu_a2a | route ms |"
echo "|---|---|---|---|---|---|---|---|---|---|"
gen() { # FILE [--remove-links N --seed S]
  local f=$1
  shift
  [ -s "$f" ] || "$fabricctl" topo gen "$spec" -o "$f" "$@" >/dev/null
}
gen "$work/complete.topo"
for e in dmodc dmodc-lb; do row "complete" "$work/complete.topo" "$e"; done
gen "$work/p1_1.topo" --remove-links 156 --seed 1
for e in dmodc dmodc-lb; do row "1 % (156), seed 1" "$work/p1_1.topo" "$e"; done
for s in $seeds; do
  gen "$work/p5_$s.topo" --remove-links 777 --seed "$s"
  for e in dmodc dmodc-lb; do row "5 % (777), seed $s" "$work/p5_$s.topo" "$e"; done
done
for e in dmodc dmodc-lb; do row "JANUS (214 switches)" "$janus" "$e"; done
