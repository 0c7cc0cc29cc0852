#!/usr/bin/env python3
"""OpenSM's routing computations in its log, one line each (ms): from "building routing with
'<engine>'" (after LID assignment) to "<engine> tables configured on all switches".

Usage: routing_windows.py LOG [DECIMALS]   (DECIMALS: digits after the point, default 2)
"""
import sys


def t(line):
    f = line.split()
    h, m, s = (int(x) for x in f[2].split(":"))
    return (h * 3600 + m * 60 + s) + int(f[3]) / 1e6


digits = int(sys.argv[2]) if len(sys.argv) > 2 else 2
start = None
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if start is None and "-> ucast_mgr_route: building routing with" in line:
        start = t(line)
    elif start is not None and "tables configured on all switches" in line:
        d = t(line) - start
        print("%.*f" % (digits, (d + 86400 if d < 0 else d) * 1e3))
        start = None
