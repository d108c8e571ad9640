#!/usr/bin/env python3
"""clock_edit.py - the edits of generated traces that the merge's clock
tests share.

  clock_edit.py guest-logcat IN OUT
      appends to guest trace IN an android_log packet of 4 entries, each
      written d ns (1000, 5000000) after the guest's ClockSnapshot k (1, 3)
      that holds REALTIME, in REALTIME; each entry's message is "k d", its
      pid 700, tid 701, tag "vm", priority 4.
  clock_edit.py host-realtime IN OUT [MONO_BEHIND_NS]
      puts first in host trace IN a ClockSnapshot of its first timestamp's
      BOOTTIME with REALTIME 1.6e18; with MONO_BEHIND_NS, every snapshot
      of the trace also gets a MONOTONIC that many ns behind its BOOTTIME
      (a suspend)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pb_walk import f_len, f_var, fields, packets, snapshot_clocks, varint


def guest_logcat(src):
    snaps = []  # (REALTIME, BOOTTIME) of each snapshot with both
    for pkt in packets(src):
        f = dict(fields(pkt))
        if 6 in f:
            c = snapshot_clocks(f[6])
            if 1 in c and 6 in c:
                snaps.append((c[1], c[6]))
    events = b''
    for k in (1, 3):
        for d in (1000, 5000000):
            events += f_len(1, f_var(2, 700) + f_var(3, 701) +
                            f_var(5, snaps[k][0] + d) + f_len(6, b'vm') +
                            f_var(7, 4) + f_len(8, b'%d %d' % (k, d)))
    pkt = (f_var(8, snaps[3][1] + 6000000) + f_var(10, 4000) +
           f_len(39, events))
    return src + f_len(1, pkt)


def with_mono(pkt, behind):
    """Packet pkt with MONOTONIC = BOOTTIME - behind added to its
    ClockSnapshot, if it has one."""
    i = 0
    while i < len(pkt):
        start = i
        k, i = varint(pkt, i)
        wt = k & 7
        if wt == 0:
            _, i = varint(pkt, i)
        elif wt == 1:
            i += 8
        elif wt == 5:
            i += 4
        else:
            n, j = varint(pkt, i)
            i = j + n
            if k >> 3 == 6:
                snap = pkt[j:i]
                boot = snapshot_clocks(snap)[6]
                snap += f_len(1, f_var(1, 3) + f_var(2, boot - behind))
                return pkt[:start] + f_len(6, snap) + pkt[i:]
    return pkt


def host_realtime(src, behind):
    first = min(dict(fields(p)).get(8, 1 << 63) for p in packets(src))
    snap = (f_len(1, f_var(1, 6) + f_var(2, first)) +
            f_len(1, f_var(1, 1) + f_var(2, 1600000000000000000)))
    out = [f_var(8, first) + f_var(10, 1) + f_len(6, snap)]
    out += list(packets(src))
    if behind is not None:
        out = [with_mono(p, behind) for p in out]
    return b''.join(f_len(1, p) for p in out)


def main():
    what, src, dst = sys.argv[1:4]
    data = open(src, 'rb').read()
    if what == 'guest-logcat':
        data = guest_logcat(data)
    elif what == 'host-realtime':
        behind = int(sys.argv[4]) if len(sys.argv) > 4 else None
        data = host_realtime(data, behind)
    else:
        sys.exit(f"clock_edit.py: unknown edit {what}")
    open(dst, 'wb').write(data)


if __name__ == '__main__':
    main()
