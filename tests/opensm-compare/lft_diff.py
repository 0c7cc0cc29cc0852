#!/usr/bin/env python3
"""LFT churn between two read-backs of a fabric's tables: reads two dumps (`ibroute` outputs
concatenated, or OpenSM `opensm-lfts.dump` files: `Unicast lids [..] of switch ... guid 0x..`
headers followed by `0xLID PORT ...` lines) and prints, as JSON, the number of 64-entry LFT
blocks (LIDs 64*b .. 64*b+63) that differ between them over all switches, the switches with a
differing block, and the differing entries. A LID a dump does not list for a switch (no route,
port 255) counts as 255; switches are matched by GUID (a switch in one dump only: every block it
has counts).

Usage: lft_diff.py BEFORE AFTER
"""
import json
import re
import sys

HEADER = re.compile(r'^Unicast lids \[[^\]]*\] of switch .*?guid (0x[0-9a-fA-F]+)')
ENTRY = re.compile(r'^(0x[0-9a-fA-F]+)\s+(\d+)')


def read(path):
    tables = {}
    cur = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = HEADER.match(line)
            if m:
                cur = tables.setdefault(int(m.group(1), 16), {})
                continue
            m = ENTRY.match(line)
            if m:
                if cur is None:
                    sys.exit("%s:%d: LFT entry before any switch header" % (path, n))
                cur[int(m.group(1), 16)] = int(m.group(2))
    return tables


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: lft_diff.py BEFORE AFTER\n")
        return 2
    a, b = read(argv[1]), read(argv[2])
    blocks = switches = entries = 0
    for guid in set(a) | set(b):
        ta, tb = a.get(guid, {}), b.get(guid, {})
        changed = set()
        for lid in set(ta) | set(tb):
            if ta.get(lid, 255) != tb.get(lid, 255):
                changed.add(lid // 64)
                entries += 1
        blocks += len(changed)
        switches += 1 if changed else 0
    print(json.dumps({"blocks": blocks, "switches": switches, "entries": entries,
                      "switches_before": len(a), "switches_after": len(b)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
