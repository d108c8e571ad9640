#!/usr/bin/env python3
"""check_onto.py - are events mapped onto a guest's time axis where the
truth puts them?

Usage: check_onto.py BEFORE AFTER TRUTH BOUND_NS

BEFORE: one time a line, the events' true host times (for host events,
their own; for another guest's, its ideal merge's), in the order of AFTER.
AFTER:  the same events' times in the merged trace (the guest's axis).
TRUTH:  lines "guest_ts,host_ts": the chosen guest's events, in its own
time and at their true host time (its ideal merge).
The truth's guest time at each true host time is interpolated between the
two truth events around it (extrapolated from the ends); every AFTER time
must be within BOUND_NS of it.  Prints the worst error; exit 1 when it is
over the bound or the counts differ.
"""
import bisect
import sys


def read_col(path):
    with open(path) as f:
        return [int(line.split(",")[0]) for line in f if line.strip()]


def main():
    before, after = read_col(sys.argv[1]), read_col(sys.argv[2])
    bound = float(sys.argv[4])
    pairs = []
    with open(sys.argv[3]) as f:
        for line in f:
            if line.strip():
                g, h = line.split(",")[:2]
                pairs.append((int(h), int(g)))
    pairs.sort()
    hs = [p[0] for p in pairs]
    if len(before) != len(after) or len(before) == 0 or len(pairs) < 2:
        print(f"counts: {len(before)} before, {len(after)} after, "
              f"{len(pairs)} truth pairs")
        return 1
    worst, at = 0.0, 0
    for h, got in zip(before, after):
        i = bisect.bisect_left(hs, h)
        i = min(max(i, 1), len(pairs) - 1)
        (h0, g0), (h1, g1) = pairs[i - 1], pairs[i]
        if h1 == h0:
            want = g0 + (h - h0)
        else:
            want = g0 + (h - h0) * (g1 - g0) / (h1 - h0)
        e = abs(got - want)
        if e > worst:
            worst, at = e, h
    print(f"{len(after)} events, worst error {worst:.0f} ns (at host "
          f"{at}), bound {bound:.0f} ns")
    return 0 if worst <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
