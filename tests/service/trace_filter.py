#!/usr/bin/env python3
"""trace_filter.py - helpers of guardrails_e2e.sh's trace_filter cases.

  trace_filter.py bytecode WORD...   Perfetto filter bytecode as a text
      proto string (\\x escapes), its checksum appended; a WORD is
      ID:OPCODE[:ARG] (opcode 1 simple, 2 range of ARG ids, 3 nested in
      message ARG) or 0 (end of message).
  trace_filter.py check TRACE        exit 0 if no packet of TRACE carries
      track_event (11) or trace_config (33), producer packets are there,
      and trace_stats has filter_stats with no errors and bytes
      discarded from buffer 0; prints what it found.
"""
import sys


def varint(v):
    out = b""
    while True:
        b, v = v & 0x7F, v >> 7
        if not v:
            return out + bytes([b])
        out += bytes([b | 0x80])


def bytecode(words):
    h = 0xCBF29CE484222325
    for w in words:
        for i in range(4):
            h ^= (w >> (8 * i)) & 0xFF
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return b"".join(varint(w) for w in words) + varint(h & 0xFFFFFFFF)


def parse_words(args):
    words = []
    for a in args:
        parts = [int(x) for x in a.split(":")]
        if len(parts) == 1:
            words.append(parts[0])
            continue
        words.append(parts[0] << 3 | parts[1])
        words.extend(parts[2:])
    return words


def fields(buf):
    """(number, wire type, value) of each field of a message."""
    i = 0
    while i < len(buf):
        tag, i = read_varint(buf, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        elif wt == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def read_varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def check(path):
    data = open(path, "rb").read()
    packets = [v for n, _, v in fields(data) if n == 1]
    bad = empty = producer = 0
    fs = None
    for p in packets:
        if not p:
            empty += 1
            continue
        f = list(fields(p))
        nums = {n for n, _, _ in f}
        bad += bool(nums & {11, 33})
        seq = [v for n, _, v in f if n == 10]
        producer += bool(seq and seq[0] != 1)
        for n, _, v in f:
            if n == 35:
                for m, _, w in fields(v):
                    if m == 11:
                        fs = {}
                        for k, _, x in fields(w):
                            fs.setdefault(k, []).append(x)
    msg = "%d packets (%d empty, %d of the producer), %d with a dropped " \
          "field" % (len(packets), empty, producer, bad)
    if fs is None:
        print(msg + "; no filter_stats")
        return 1
    msg += "; filter_stats input_packets %s errors %s discarded %s" % (
        fs.get(1), fs.get(4), fs.get(20))
    ok = (bad == 0 and producer > 0 and fs.get(4) == [0] and
          fs.get(1, [0])[0] > 0 and fs.get(20, [0])[0] > 0)
    print(msg)
    return 0 if ok else 1


def main():
    if sys.argv[1] == "bytecode":
        bc = bytecode(parse_words(sys.argv[2:]))
        print("".join("\\x%02x" % b for b in bc))
        return 0
    return check(sys.argv[2])


if __name__ == "__main__":
    sys.exit(main())
