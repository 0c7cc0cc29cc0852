#!/usr/bin/env python3
"""LIDs read back from a fabric: reads `ibnetdiscover` output (which annotates every switch and
CA port with the LID the subnet manager gave it) and writes

  * an OpenSM `guid2lid` file (`0x%016x 0x%04x 0x%04x`: switch node GUID or CA port GUID, first
    and last LID of its 2^LMC range) to GUID2LID, and
  * the switch LIDs, one per line, to stdout (what `ibroute` needs to read each switch's LFT).

Usage: lids.py IBNETDISCOVER_OUTPUT GUID2LID

Exits non-zero, naming the file and line, when a switch or a CA port has no LID (an SM that did
not finish) or a line cannot be read.
"""
import re
import sys

SWITCH_GUID = re.compile(r'^switchguid=0x([0-9a-fA-F]+)')
SWITCH = re.compile(r'^Switch\s+\d+\s+"[^"]*".*#.*\bport 0 lid (\d+) lmc (\d+)')
SWITCH_ANY = re.compile(r'^Switch\s')
# CA record port line: [1](portguid) "S-..."[p] # lid L lmc M "desc" lid L' 4xQDR
CA_PORT = re.compile(r'^\[\d+\]\(([0-9a-fA-F]+)\)\s+"[^"]*"\[\d+\].*#\s*lid (\d+) lmc (\d+)')


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: lids.py IBNETDISCOVER_OUTPUT GUID2LID\n")
        return 2
    src, out = argv[1], argv[2]
    records = {}
    switch_lids = []
    pending_guid = None
    in_ca = False
    with open(src, encoding="utf-8", errors="replace") as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            m = SWITCH_GUID.match(line)
            if m:
                pending_guid = int(m.group(1), 16)
                continue
            if SWITCH_ANY.match(line):
                in_ca = False
                m = SWITCH.match(line)
                if not m or pending_guid is None:
                    sys.stderr.write(f"{src}:{n}: switch record without GUID or LID: {line}\n")
                    return 1
                lid = int(m.group(1))
                if lid == 0:
                    sys.stderr.write(f"{src}:{n}: switch 0x{pending_guid:016x} has no LID\n")
                    return 1
                records[pending_guid] = (lid, lid)
                switch_lids.append(lid)
                pending_guid = None
                continue
            if line.startswith(("Ca\t", "Ca ", "Hca", "Rt\t", "Rt ")):
                in_ca = True
                continue
            if in_ca and line.startswith("["):
                m = CA_PORT.match(line)
                if not m:
                    sys.stderr.write(f"{src}:{n}: CA port line without LID: {line}\n")
                    return 1
                guid, lid, lmc = int(m.group(1), 16), int(m.group(2)), int(m.group(3))
                if lid == 0:
                    sys.stderr.write(f"{src}:{n}: CA port 0x{guid:016x} has no LID\n")
                    return 1
                records[guid] = (lid, lid + (1 << lmc) - 1)
    if not switch_lids:
        sys.stderr.write(f"{src}: no switch found\n")
        return 1
    with open(out, "w", encoding="utf-8") as g:
        for guid in sorted(records):
            lo, hi = records[guid]
            g.write(f"0x{guid:016x} 0x{lo:04x} 0x{hi:04x}\n")
    sys.stdout.write("".join(f"{lid}\n" for lid in switch_lids))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
