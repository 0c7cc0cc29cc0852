#!/usr/bin/env bash
# Job-aware routing study: Dmodc versus job-aware Dmodc (node ids re-indexed by job, thesis
# Alg. 4) on a fat-tree with disjoint jobs placed at random (a fragmented cluster) plus one job
# on a contiguous block, 5 placements (seeds). Per job size: the job's own collectives (mu of its
# job-local shift permutations, worst over the seeds and mean) and the effective edge-forwarding
# index of its all-to-all; then what grouping costs traffic that ignores jobs (fabric-wide mu_sp,
# mu_rp median). Usage: tests/job-aware-study.sh [SPEC] [RP] [--degrade N] > table.md
set -euo pipefail
cd "$(dirname "$0")/.."
spec=${1:-'PGFT(3;12,12,24;1,12,12;1,1,1)'}
rp=${2:-100}
remove=${3:-0}
cargo build --release -q -p fabricctl
bin=${CARGO_TARGET_DIR:-target}/release/fabricctl
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if [ "$remove" -gt 0 ]; then
  "$bin" topo gen "$spec" -o "$tmp/f.topo" --remove-links "$remove" --seed 1
else
  "$bin" topo gen "$spec" -o "$tmp/f.topo"
fi
# End ports in file order (the global node order), by node GUID (`H-<guid>` in the file).
python3 - "$tmp/f.topo" >"$tmp/names" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    m = re.match(r'^(Ca|Hca)\s+\d+\s+"[HS]-([0-9a-fA-F]+)"', line)
    if m:
        print("0x" + m.group(2))
PY
for seed in 1 2 3 4 5; do
  python3 - "$tmp/names" "$seed" >"$tmp/jobs.$seed" <<'PY'
import random, sys
names = [l.strip() for l in open(sys.argv[1]) if l.strip()]
rng = random.Random(int(sys.argv[2]))
n = len(names)
# A contiguous block of n/8 end ports at a random aligned offset, then random placements.
block = n // 8
start = rng.randrange(8) * block
used = set(range(start, start + block))
rest = [i for i in range(n) if i not in used]
rng.shuffle(rest)
jobs = [("block%d" % block, sorted(used))]
at = 0
for size in (16, 64, 256, 1024):
    if at + size > len(rest):
        break
    jobs.append(("rand%d" % size, sorted(rest[at:at + size])))
    at += size
for name, members in jobs:
    print(name + ": " + " ".join('"%s"' % names[i] for i in members))
PY
  for mode in plain aware; do
    args=(analyze "$tmp/f.topo" --rp "$rp" --seed "$seed" --no-a2a --jobs "$tmp/jobs.$seed" --json)
    [ "$mode" = aware ] && args+=(--job-aware)
    "$bin" "${args[@]}" | tr -d '\n' >>"$tmp/$mode.jsonl"
    echo >>"$tmp/$mode.jsonl"
  done
done
python3 - "$tmp/plain.jsonl" "$tmp/aware.jsonl" "$spec" "$remove" <<'PY'
import json, sys
plain = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
aware = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
spec, remove = sys.argv[3], int(sys.argv[4])
print("Fabric `%s`%s, %d end ports; 5 placements (seeds 1-5)." % (
    spec, ", %d random cables removed" % remove if remove else "", plain[0]["nodes"]))
print()
print("| job | end ports | job-local mu_sp, Dmodc (worst / mean) | job-aware (worst / mean) | effective xi, Dmodc (mean) | job-aware (mean) |")
print("|---|---|---|---|---|---|")
names = [j["name"] for j in plain[0]["jobs"]]
for k, name in enumerate(names):
    def col(runs, key):
        v = [r["jobs"][k][key] for r in runs]
        return v
    p, a = col(plain, "mu_sp"), col(aware, "mu_sp")
    px, ax = col(plain, "effective_xi"), col(aware, "effective_xi")
    print("| %s | %d | %d / %.1f | %d / %.1f | %.0f | %.0f |" % (
        name, plain[0]["jobs"][k]["end_ports"], max(p), sum(p) / len(p), max(a), sum(a) / len(a),
        sum(px) / len(px), sum(ax) / len(ax)))
print()
print("| routing | fabric mu_sp (worst / mean) | fabric mu_rp median (mean) | valid | deadlock-free | route ms (mean) |")
print("|---|---|---|---|---|---|")
for label, runs in (("Dmodc", plain), ("job-aware Dmodc", aware)):
    sp = [r["mu_sp"] for r in runs]
    rp = [r["mu_rp"]["median"] for r in runs]
    print("| %s | %d / %.1f | %.1f | %s | %s | %.1f |" % (
        label, max(sp), sum(sp) / len(sp), sum(rp) / len(rp),
        all(r["valid"] for r in runs), all(r["deadlock_free"] for r in runs),
        sum(r["route_ms"] for r in runs) / len(runs)))
PY
