#!/usr/bin/env python3
"""ftrace_heavy.py - an ftrace-heavy guest trace, as a busy kernel records it.

Runs the project's generator for a host trace and a small guest trace with
sync data, then appends compact_sched FtraceEventBundles (about 34 KB each,
2000 sched_switch and 2000 sched_waking events) on one ftrace sequence until
the guest trace reaches the target size.  Nearly all bytes are then on one
sequence, the shape that a split by sequence cannot spread.

usage: ftrace_heavy.py TRACEGEN HOST.pb GUEST.pb TARGET_BYTES [--seed N]
"""
import os, random, subprocess, sys


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_len(num, payload):
    return varint((num << 3) | 2) + varint(len(payload)) + payload


def field_varint(num, v):
    return varint(num << 3) + varint(v)


def read_varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def packet_times(path):
    """Smallest and largest TracePacket.timestamp (field 8) of the trace."""
    data = open(path, "rb").read()
    lo, hi, i = None, None, 0
    while i < len(data):
        tag, i = read_varint(data, i)
        n, i = read_varint(data, i)
        pkt, i = data[i:i + n], i + n
        if tag != 0x0A:
            continue
        j = 0
        while j < len(pkt):
            t, j = read_varint(pkt, j)
            wt = t & 7
            if wt == 0:
                v, j = read_varint(pkt, j)
                if t >> 3 == 8:
                    lo = v if lo is None else min(lo, v)
                    hi = v if hi is None else max(hi, v)
            elif wt == 2:
                m, j = read_varint(pkt, j)
                j += m
            elif wt == 1:
                j += 8
            elif wt == 5:
                j += 4
            else:
                break
    return lo, hi


COMMS = [b"swapper/0", b"kworker/0:1", b"bash", b"sshd", b"vperfetto"]
PIDS = [0, 17, 4242, 811, 1200]
N_EV = 2000


def bundle_parts(rng, span_ns):
    """The compact_sched arrays with the first timestamps left out: the
    deltas of the timestamp arrays, and the rest of the message."""
    step = max(1, span_ns // N_EV)
    sw = b"".join(varint(rng.randrange(step // 2, step + step // 2 + 1))
                  for _ in range(N_EV - 1))
    wk = b"".join(varint(rng.randrange(step // 2, step + step // 2 + 1))
                  for _ in range(N_EV - 1))
    idx = [rng.randrange(1, len(COMMS)) for _ in range(N_EV)]
    rest_sw = (field_len(2, b"".join(varint(rng.randrange(3)) for _ in idx)) +
               field_len(3, b"".join(varint(PIDS[k]) for k in idx)) +
               field_len(4, b"".join(varint(120) for _ in idx)) +
               field_len(6, b"".join(varint(k) for k in idx)))
    rest_wk = (field_len(8, b"".join(varint(PIDS[k]) for k in idx)) +
               field_len(9, b"".join(varint(k % 2) for k in idx)) +
               field_len(10, b"".join(varint(120) for _ in idx)) +
               field_len(11, b"".join(varint(k) for k in idx)) +
               field_len(12, b"".join(varint(1) for _ in idx)))
    intern = b"".join(field_len(5, c) for c in COMMS)
    return sw, wk, intern, rest_sw, rest_wk


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 1
    tg, host, guest, target = sys.argv[1:5]
    target = int(target)
    seed = int(sys.argv[6]) if len(sys.argv) > 6 and sys.argv[5] == "--seed" else 5
    subprocess.run([tg, "--host", host, "--guest", guest, "--seed", str(seed),
                    "--duration-s", "600", "--events", "200000",
                    "--exchanges", "200", "-q"], check=True)
    lo, hi = packet_times(guest)
    rng = random.Random(seed)
    base = os.path.getsize(guest)
    n_bundles = max(1, (target - base) // 34000)
    span = max(1, (hi - lo) // n_bundles)
    variants = [bundle_parts(rng, span) for _ in range(8)]
    seq = field_varint(10, 50)  # the generator's ftrace sequence of cpu 0
    size = base
    with open(guest, "ab") as f:
        k = 0
        while size < target:
            sw, wk, intern, rest_sw, rest_wk = variants[k % len(variants)]
            t0 = lo + k * (hi - lo) // n_bundles
            cs = (intern + field_len(1, varint(t0) + sw) + rest_sw +
                  field_len(7, varint(t0 + 1000) + wk) + rest_wk)
            bundle = field_varint(1, 0) + field_len(4, cs)
            pkt = field_len(1, bundle) + seq
            rec = field_len(1, pkt)
            f.write(rec)
            size += len(rec)
            k += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
