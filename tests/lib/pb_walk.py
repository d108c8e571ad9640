"""pb_walk.py - the protobuf wire walk the tests' Python checks share:
varints, a message's fields, a trace file's packets, and the few
encoders that add a packet to a trace (vint, f_var, f_len).  For tests only: it
trusts its input (a malformed trace ends in an exception)."""


def varint(b, i):
    """The varint at b[i]: (value, index after it)."""
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(p):
    """(field number, value) of message p: an int for a varint, the bytes
    for a length-delimited field, None for a fixed-size one."""
    i = 0
    while i < len(p):
        k, i = varint(p, i)
        wt = k & 7
        if wt == 0:
            v, i = varint(p, i)
        elif wt == 2:
            n, i = varint(p, i)
            v, i = p[i:i + n], i + n
        elif wt == 1:
            v, i = None, i + 8
        elif wt == 5:
            v, i = None, i + 4
        else:
            raise ValueError('bad wire type %d' % wt)
        yield k >> 3, v


def packets(b):
    """The TracePacket bytes of trace file b, in order."""
    i = 0
    while i < len(b):
        _, i = varint(b, i)
        n, i = varint(b, i)
        yield b[i:i + n]
        i += n


def snapshot_clocks(snap):
    """{clock_id: timestamp} of a ClockSnapshot's bytes."""
    out = {}
    for num, c in fields(snap):
        if num == 1:
            c = dict(fields(c))
            out[c.get(1)] = c.get(2)
    return out


def vint(v):
    """v (>= 0) as a varint."""
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7f | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def f_var(num, v):
    """Field num, a varint v."""
    return vint(num << 3) + vint(v)


def f_len(num, b):
    """Field num, length-delimited bytes b (a packet of a trace file is
    f_len(1, packet))."""
    return vint(num << 3 | 2) + vint(len(b)) + b
