#!/usr/bin/env bash
# Compares the daemon benches (crates/fabricd/benches: fault_to_commit, update_protocol) of a base
# revision with the working tree, on the same machine in one session.
#
#   tests/bench-compare.sh BASE_REV [ROUNDS]
#
# BASE_REV is built in a temporary `git worktree` into a target directory of its own
# (`$CARGO_TARGET_DIR/bench-base`, or BASE_TARGET_DIR; kept between runs): in a shared one, the
# workspace crates of the two trees would take each other's artifacts as up to date.
# Both bench binaries are built first, then run interleaved: base, new, base, new, … ROUNDS times
# each (default 2): the machine is noisy, so a slow phase hits both sides. Each run's medians are
# taken from the bench's own output (these benches are harness-less: they print median, p99 and
# max of their fault-to-commit latencies), and the table shows the median over the rounds:
#
#   bench                                         base ms     new ms   new/base
#
# Builds are release builds (the bench profile): the first run builds the dependencies once
# (about 13 min on a busy 2-core machine), then each run rebuilds the workspace crates of both
# trees (a few minutes each: the base tree is a fresh checkout).
#
# Environment: FAULTS (link-down faults per run, default 30 for fault_to_commit, 10 for
# update_protocol), SPEC (the fabric, default the benches' 8640-node PGFT), CARGO_TARGET_DIR.
# A ratio above 1 means the working tree is slower. Raw outputs are kept in $OUT (printed).
set -euo pipefail

BASE=${1:?usage: tests/bench-compare.sh BASE_REV [ROUNDS]}
ROUNDS=${2:-2}
ROOT=$(git rev-parse --show-toplevel)
cd "$ROOT"
BASE_SHA=$(git rev-parse --verify "$BASE^{commit}")
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=$(mktemp -d /tmp/bench-compare.XXXXXX)
WT="$OUT/base-tree"
BENCHES=(fault_to_commit update_protocol)

cleanup() { git -C "$ROOT" worktree remove --force "$WT" 2>/dev/null || true; }
trap cleanup EXIT

# build DIR LABEL: builds the benches of the tree at DIR (one cargo call), copies them to
# $OUT/LABEL-<bench>.
build() {
    local dir=$1 label=$2 bench args=()
    for bench in "${BENCHES[@]}"; do args+=(--bench "$bench"); done
    (cd "$dir" && cargo bench -p fabricd "${args[@]}" --no-run --message-format=json 2>"$OUT/build-$label.log") |
        python3 -c '
import json, shutil, sys
out, label = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        name = m["target"]["name"]
        shutil.copy(m["executable"], f"{out}/{label}-{name}")
' "$OUT" "$label" || true
    for bench in "${BENCHES[@]}"; do
        if [[ ! -x $OUT/$label-$bench ]]; then
            echo "bench-compare: building $bench of $label failed; see $OUT/build-$label.log" >&2
            tail -20 "$OUT/build-$label.log" >&2
            exit 1
        fi
    done
}

echo "bench-compare: base $BASE ($BASE_SHA), new = working tree of $ROOT; raw output in $OUT"
git worktree add --detach "$WT" "$BASE_SHA" >/dev/null
echo "bench-compare: building base…"
# The base tree builds into a target directory of its own: cargo names a workspace crate's
# artifacts by its path relative to the workspace root, the same in both trees, so in a shared
# directory the second build would take the first one's crates as up to date.
CARGO_TARGET_DIR="${BASE_TARGET_DIR:-$CARGO_TARGET_DIR/bench-base}" build "$WT" base
echo "bench-compare: building new…"
build "$ROOT" new

# run LABEL BENCH ROUND: one run, output kept in $OUT/LABEL-BENCH-ROUND.txt.
run() {
    local label=$1 bench=$2 round=$3 args=() dir=$ROOT
    [[ $label == base ]] && dir=$WT
    [[ -n ${SPEC:-} ]] && args+=(--spec "$SPEC")
    case $bench in
        fault_to_commit) args+=(--faults "${FAULTS:-30}") ;;
        update_protocol) args+=(--faults "${FAULTS:-10}") ;;
    esac
    echo "bench-compare: round $round: $label $bench"
    (cd "$dir" && "$OUT/$label-$bench" --bench "${args[@]}") >"$OUT/$label-$bench-$round.txt" 2>&1 || {
        echo "bench-compare: $label $bench failed:" >&2
        tail -20 "$OUT/$label-$bench-$round.txt" >&2
        exit 1
    }
}

for round in $(seq 1 "$ROUNDS"); do
    for bench in "${BENCHES[@]}"; do
        run base "$bench" "$round"
        run new "$bench" "$round"
    done
done

# The medians each run prints: "<row name> median <ms>" (fault_to_commit) and
# "<row name> fault -> committed median <ms>" (update_protocol).
python3 - "$OUT" "$ROUNDS" <<'EOF'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = {}  # (bench, row) -> {"base": [..], "new": [..]}
order = []
for bench in ("fault_to_commit", "update_protocol"):
    for label in ("base", "new"):
        for r in range(1, rounds + 1):
            for line in open(f"{out}/{label}-{bench}-{r}.txt", errors="replace"):
                m = re.match(r"\s+(.+?)\s+(?:fault -> committed )?median\s+([0-9.]+) ms", line)
                if not m:
                    continue
                key = (bench, m.group(1).strip())
                if key not in rows:
                    rows[key] = {"base": [], "new": []}
                    order.append(key)
                rows[key][label].append(float(m.group(2)))
print()
print(f"{'bench':<60} {'base ms':>10} {'new ms':>10} {'new/base':>9}")
for key in order:
    b, n = rows[key]["base"], rows[key]["new"]
    name = f"{key[0]}: {key[1]}"
    if not b or not n:
        print(f"{name:<60} {'-' if not b else f'{statistics.median(b):.2f}':>10} "
              f"{'-' if not n else f'{statistics.median(n):.2f}':>10} {'-':>9}")
        continue
    mb, mn = statistics.median(b), statistics.median(n)
    print(f"{name:<60} {mb:>10.2f} {mn:>10.2f} {mn / mb if mb else float('nan'):>9.2f}")
print(f"\n(median over {rounds} interleaved round(s) of each run's median; raw output in {out})")
EOF
