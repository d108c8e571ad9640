#!/usr/bin/env python3
"""check_big_output.py - checks merge_rss.sh's outputs of guests with one
large packet appended, against the merge of the guest without it (BASE):
the output must start with BASE's bytes, and what follows must be:

  check_big_output.py passed BASE OUT
      one packet: the appended 60 MiB field 9000 of zeros byte for byte,
      then its machine_id (98) and nothing else
  check_big_output.py field NUM IN BASE OUT
      one packet, whose field NUM is byte for byte the one of the last
      packet of IN (the guest trace the merge read)
  check_big_output.py remapped NUM IN BASE OUT
      one packet, whose field NUM (a process tree or process stats) has
      the entries of the one of the last packet of IN, each with its pid
      moved by the same offset (--no-machine-id) and its other fields
      but the ppid as they are
  check_big_output.py events BASE OUT SPLIT
      the same ftrace events as SPLIT (the merge of the same events in
      bundles of 1000) after BASE, in the same order
  check_big_output.py compressed BASE OUT PLAIN
      packets whose compressed_packets (50, one each) inflate, one after
      another, to the bytes PLAIN (the merge of the same packets
      uncompressed) has after BASE

Exits non-zero (an assertion) when they are not.
"""
import sys
import zlib


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b, i, end):
    """(number, start, end) of each length-delimited field of b[i:end],
    (number, value, None) of the others."""
    while i < end:
        t, i = varint(b, i)
        if t & 7 == 2:
            n, i = varint(b, i)
            yield t >> 3, i, i + n
            i += n
        else:
            v, i = varint(b, i)
            yield t >> 3, v, None


def tail(base, out):
    """out after base's bytes, which it must start with."""
    small = open(base, "rb").read()
    data = open(out, "rb").read()
    assert data[:len(small)] == small, "the rest of the output changed"
    return data, len(small)


def one_packet(data, start):
    """The fields of the one packet data holds from start on."""
    packets = list(fields(data, start, len(data)))
    assert len(packets) == 1 and packets[0][0] == 1, "one packet after the rest"
    _, i, end = packets[0]
    return list(fields(data, i, end))


def events(data, start):
    """The events of the bundles of the packets from start on, in order."""
    ev = []
    for num, i, end in fields(data, start, len(data)):
        assert num == 1
        for pnum, j, pend in fields(data, i, end):
            if pnum != 1:
                continue
            for bnum, k, bend in fields(data, j, pend):
                if bnum == 2:
                    ev.append(data[k:bend])
    return ev


def last_field(path, num):
    """Field num of the last packet of the trace at path."""
    data = open(path, "rb").read()
    last = list(fields(data, 0, len(data)))[-1]
    got = [data[i:end] for n, i, end in fields(data, last[1], last[2])
           if n == num]
    assert len(got) == 1, "one field %d in the last packet" % num
    return got[0]


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "field":
        num = int(sys.argv[2])
        data, start = tail(sys.argv[4], sys.argv[5])
        got = [data[i:end] for n, i, end in one_packet(data, start)
               if n == num]
        assert got == [last_field(sys.argv[3], num)], "the field"
        return
    if len(sys.argv) == 6 and sys.argv[1] == "remapped":
        num = int(sys.argv[2])
        data, start = tail(sys.argv[4], sys.argv[5])
        got = [data[i:end] for n, i, end in one_packet(data, start)
               if n == num]
        want = last_field(sys.argv[3], num)
        assert len(got) == 1, "one field %d" % num

        def entries(b):
            return [[(n, a if e is None else b[a:e])
                     for n, a, e in fields(b, i, end)]
                    for _, i, end in fields(b, 0, len(b))]
        a, b = entries(got[0]), entries(want)
        assert len(a) == len(b) > 1000, (len(a), len(b))
        offsets = set()
        for x, y in zip(a, b):
            offsets.add(dict(x)[1] - dict(y)[1])
            assert [f for f in x if f[0] not in (1, 2)] == \
                [f for f in y if f[0] not in (1, 2)], "an entry's fields"
        assert len(offsets) == 1 and 0 not in offsets, offsets
        return
    mode, base, out = sys.argv[1:4]
    data, start = tail(base, out)
    if mode == "passed" and len(sys.argv) == 4:
        f = one_packet(data, start)
        assert f[0][0] == 9000 and \
            data[f[0][1]:f[0][2]] == bytes(60 << 20), "the field"
        assert [x[0] for x in f[1:]] == [98], f[1:]
    elif mode == "events" and len(sys.argv) == 5:
        split, split_start = tail(base, sys.argv[4])
        a, b = events(data, start), events(split, split_start)
        assert len(a) == len(b) > 500000, (len(a), len(b))
        assert a == b, "the events differ"
    elif mode == "compressed" and len(sys.argv) == 5:
        plain, plain_start = tail(base, sys.argv[4])
        inner = []
        for num, i, end in fields(data, start, len(data)):
            assert num == 1, "packets after the rest"
            z = [zlib.decompress(data[j:e])
                 for n, j, e in fields(data, i, end) if n == 50]
            assert len(z) == 1, "one compressed_packets a packet"
            inner.append(z[0])
        assert b"".join(inner) == plain[plain_start:], \
            "the packets inside differ"
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
