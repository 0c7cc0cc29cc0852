#!/usr/bin/env bash
# Issue 19 acceptance under ibsim, in one run: for each fabric of --fabrics, complete and with
# 1 % and 5 % of its inter-switch cables removed, the same fabric file is programmed by OpenSM
# (`dfsssp`, `lash`, `nue`) and by fabricd (umad driver: five-phase with LMC 1, and direct with
# LMC 0), each on a fresh ibsim (tests/opensm-compare.sh, one invocation per file), the tables are
# read back with `ibroute` and analysed, and one Markdown table collects VLs, mu_rp median,
# mu_a2a and the routing time of every manager.
#
#   * Files: `fabricctl topo gen SPEC -o F [--remove-links N --seed S]` with
#     N = round(cables × pct / 100), at least 1, where cables = the inter-switch cables of the
#     complete fabric (`links` of `fabricctl topo info --json`); e.g. SLIMFLY(7): 539 cables,
#     1 % = 5, 5 % = 27.
#   * VLs: OpenSM dfsssp's "Virtual Lanes needed", lash's "Lanes needed", nue's nue_max_num_vls;
#     fabricd: its VL layers, + 1 (the escape VL) at LMC 1 (see tests/opensm-compare.sh).
#   * Route ms: OpenSM's routing window in its log (microsecond timestamps) from "building
#     routing with" to "tables configured on all switches", on a re-sweep after SIGHUP (same
#     tables: no LFT MAD queued, the computation alone) and, in parentheses, on the first sweep
#     (which queues the LFT Set MADs inside the window); fabricd's `compute_ms` on a re-sweep
#     (`fabricctl reroute --wait` on the fabric it has programmed: a full recomputation, nothing
#     of the previous generation reused) and, in parentheses, of its first generation (topology,
#     ranking, LIDs, base routing, escape routing at LMC 1, validity check and repair, VL
#     layering, multicast, partitions, diff; the uploads are outside). "×" columns: OpenSM's
#     re-sweep time / fabricd's first-generation compute_ms; "× … re-sweep" columns: OpenSM's
#     re-sweep / fabricd's re-sweep (like for like); both against the first fabricd variant of
#     --sms.
#
# Usage: tests/direct-compare.sh [--fabrics "SPEC ..."] [--cuts "0 1 5"] [--sms "..."]
#            [--rp N] [--seed S] [--bin-dir DIR] [--out DIR] [--fabricd-engine ENGINE] [--repeat N]
#   --fabrics  generator notations (default: SLIMFLY(5;4) SLIMFLY(7) DRAGONFLY(3) HYPERX(8,8;4))
#   --cuts     percentages of inter-switch cables removed (default "0 1 5")
#   --sms      managers, as tests/opensm-compare.sh --sms (default "dfsssp lash nue fabricd
#              fabricd-direct", plus fabricd-direct=balanced:2 when the engine exists)
#   --rp       random permutations for mu_rp (default 1000)
#   --seed     seed of the cable removals (default 1)
#   --bin-dir  fabricd and fabricctl (default: `cargo build --release`, CARGO_TARGET_DIR)
#   --out      directory for the fabric files, logs, rows.jsonl and table.md (default: a temp dir)
#   --fabricd-engine  passed on (fabricd variants without `=ENGINE`; default dfsssp)
#   --repeat   timed runs per manager, OpenSM and fabricd re-sweeps (route ms: medians; default 1)
set -euo pipefail
cd "$(dirname "$0")/.."

fabrics='SLIMFLY(5;4) SLIMFLY(7) DRAGONFLY(3) HYPERX(8,8;4)'
cuts="0 1 5"
sms=""
rp=1000
seed=1
bin_dir=""
out=""
engine=dfsssp
repeat=1
while [ $# -gt 0 ]; do
  case "$1" in
    --fabrics) fabrics=$2; shift 2 ;;
    --cuts) cuts=$2; shift 2 ;;
    --sms) sms=$2; shift 2 ;;
    --rp) rp=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --fabricd-engine) engine=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -h|--help) sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "direct-compare: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
log() { echo "direct-compare: $*" >&2; }
die() { log "$*"; exit 1; }

if [ -z "$sms" ]; then
  sms="dfsssp lash nue fabricd fabricd-direct"
  grep -q '"balanced' crates/fabric-routing/src/route.rs && sms="$sms fabricd-direct=balanced:2"
fi
if [ -z "$bin_dir" ]; then
  log "building fabricd and fabricctl (release)"
  cargo build --release -q -p fabricd -p fabricctl
  bin_dir=${CARGO_TARGET_DIR:-target}/release
fi
bin_dir=$(cd "$bin_dir" && pwd)
fabricctl=$bin_dir/fabricctl
[ -x "$fabricctl" ] && [ -x "$bin_dir/fabricd" ] || die "fabricd/fabricctl not in $bin_dir"
[ -n "$out" ] || out=$(mktemp -d /tmp/direct-compare.XXXXXX)
mkdir -p "$out"
rows=$out/rows.jsonl
: >"$rows"
log "managers: $sms; output in $out; load: $(uptime | sed 's/.*load average: //')"

t_all=$(date +%s)
for spec in $fabrics; do
  base=$(printf '%s' "$spec" | tr -c 'A-Za-z0-9\n' '_')
  "$fabricctl" topo gen "$spec" -o "$out/$base.net"
  cables=$("$fabricctl" topo info "$out/$base.net" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["links"])')
  for pct in $cuts; do
    n=$(python3 -c 'import sys; c, p = int(sys.argv[1]), float(sys.argv[2]); print(0 if p == 0 else max(1, int(c * p / 100 + 0.5)))' "$cables" "$pct")
    f=$out/$base.net
    label=$spec
    if [ "$n" -gt 0 ]; then
      f=$out/$base-cut$pct.net
      "$fabricctl" topo gen "$spec" -o "$f" --remove-links "$n" --seed "$seed"
      label="$spec, $pct % cut ($n of $cables cables)"
    fi
    t0=$(date +%s)
    log "$label: start $(date -u +%H:%M:%S), load $(uptime | sed 's/.*load average: //')"
    tests/opensm-compare.sh --file "$f" --sms "$sms" --rp "$rp" --no-smp-count --bin-dir "$bin_dir" \
      --fabricd-engine "$engine" --repeat "$repeat" --json-out "$out/part.jsonl" >"$out/$(basename "$f" .net).md" \
      2>"$out/$(basename "$f" .net).log" || die "$label: opensm-compare failed; see $out/$(basename "$f" .net).log"
    python3 - "$out/part.jsonl" "$label" "$spec" "$pct" "$n" "$(($(date +%s) - t0))" >>"$rows" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    r.update({"label": sys.argv[2], "spec": sys.argv[3], "cut_pct": float(sys.argv[4]),
              "cut_cables": int(sys.argv[5]), "fabric_s": int(sys.argv[6])})
    print(json.dumps(r))
EOF
    rm -f "$out/part.jsonl"
    log "$label: done in $(($(date +%s) - t0)) s"
  done
done

python3 - "$rows" >"$out/table.md" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
labels = list(dict.fromkeys(r["label"] for r in rows))
sms = list(dict.fromkeys(r["sm"] for r in rows))
fd = [s for s in sms if s.startswith("fabricd")]
def cell(r):
    if r is None:
        return "-"
    ms = r["resweep_ms"] if r["resweep_ms"] is not None else r["route_ms"]
    t = "%.1f" % ms
    if r["resweep_ms"] is not None:
        t += " (%.0f)" % r["route_ms"]
    v = "" if r["valid"] else " **invalid**"
    a2a = "-" if r["mu_a2a"] is None else str(r["mu_a2a"])
    return "%s, %g, %s, %s%s" % (r["vls"] if r["vls"] is not None else "?", r["mu_rp_median"], a2a, t, v)
print("Each cell: VLs, mu_rp median, mu_a2a, route ms (OpenSM: re-sweep (first sweep); fabricd: compute_ms of a re-sweep, "
      "a forced full recomputation (first generation); medians over --repeat). "
      "× = OpenSM re-sweep ms / fabricd (%s) first-generation compute_ms; "
      "× re-sweep = OpenSM re-sweep ms / fabricd re-sweep compute_ms." % fd[0] if fd else "")
print()
osm = [s for s in sms if not s.startswith("fabricd")]
head = ["fabric"] + sms + ["× %s" % s for s in osm] + ["× %s re-sweep" % s for s in osm]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for lab in labels:
    by = {r["sm"]: r for r in rows if r["label"] == lab}
    cells = [lab] + [cell(by.get(s)) for s in sms]
    f = by.get(fd[0]) if fd else None
    for key in ("route_ms", "resweep_ms"):
        for s in osm:
            o = by.get(s)
            if f and o and o["resweep_ms"] is not None and f.get(key):
                x = o["resweep_ms"] / f[key]
                cells.append("%.0f" % x if x >= 10 else "%.1f" % x)
            else:
                cells.append("-")
    print("| " + " | ".join(cells) + " |")
print()
print("Minutes per fabric file: " + ", ".join("%s %.1f" % (l, next(r["fabric_s"] for r in rows if r["label"] == l) / 60) for l in labels))
EOF
cat "$out/table.md"
log "all done in $(($(date +%s) - t_all)) s; load: $(uptime | sed 's/.*load average: //')"
