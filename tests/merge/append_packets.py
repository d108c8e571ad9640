#!/usr/bin/env python3
"""append_packets.py - appends hand-made packets to generated traces, for
the cases of merge_options.sh and merge_rss.sh that the generator does not
write.

  append_packets.py realtime GUEST OUT
      two instants at one guest instant: "boot_tick" on BOOTTIME and
      "rt_tick" on REALTIME (the generator's guest snapshots say REALTIME
      = BOOTTIME + 1.7e18 ns)
  append_packets.py ftrace HOST GUEST HOST_OUT GUEST_OUT
      the host gets two sched_switch on cpu 3 (tid 77 running); the guest
      a print "B|1234|vp_work" and "E|1234" by pid 1234 on its cpu 1
  append_packets.py bigpacket TRACE OUT MIB
      one packet of MIB MiB: an unknown field (9000) of zeros, as a newer
      producer may write
  append_packets.py bigbundle TRACE BIG_OUT SMALL_OUT MIB
      sched_switch events, one every 100 ns from the generator's guest
      time on, on cpu 1 of sequence 7: BIG_OUT gets them as one ftrace
      bundle of about MIB MiB, SMALL_OUT the same events in bundles of
      1000 (one packet each)
  append_packets.py bigcompressed TRACE Z_OUT PLAIN_OUT N
      N small packets (a timestamp every 10 ns from the generator's guest
      time on, sequence 9, 8 bytes of an unknown field): Z_OUT gets them
      in one compressed_packets (zlib), PLAIN_OUT as they are
  append_packets.py bigevent TRACE BIG_OUT SMALL_OUT MIB
      a cros/guest_clock_sync track event (a sync sample at the
      generator's guest time) on sequence 4077: BIG_OUT's with a debug
      annotation of MIB MiB beside its values, SMALL_OUT's with one of
      a few bytes
  append_packets.py biginterned TRACE OUT MIB
      interned data of about MIB MiB on sequence 4078: event names of
      1000 bytes each
  append_packets.py bigtree TRACE OUT MIB
      a process tree of about MIB MiB: processes with 1000-byte
      cmdlines
  append_packets.py bomb TRACE Z_OUT PLAIN_OUT MIB
      one packet (a timestamp, sequence 9, a track event whose debug
      annotation holds MIB MiB of zeros) and a small one after it:
      Z_OUT gets them in one compressed_packets of a few KB, PLAIN_OUT
      as they are
  append_packets.py randcompressed TRACE Z_OUT PLAIN_OUT MIB
      small packets (a timestamp every 10 ns, sequence 9, 1000 random
      bytes of an unknown field) of MIB MiB in all, which do not
      compress: Z_OUT gets them in one compressed_packets of about MIB
      MiB, PLAIN_OUT as they are
  append_packets.py badinside TRACE OUT
      a compressed packet of about 2 KB holding one packet of 2 MiB whose
      last bytes are no field (wire type 7)
  append_packets.py bigwhole TRACE OUT PART MIB
      one packet (sequence 4079) whose PART, a part the merge reads
      whole, is of about MIB MiB: "snapshot" a clock snapshot of many
      clocks, "defaults" trace_packet_defaults with MIB MiB of an
      unknown field, "print" an ftrace bundle of one print event of MIB
      MiB
  append_packets.py sequences TRACE OUT N
      N packets (a timestamp each), each on a sequence of its own
  append_packets.py fakemiddle TRACE OUT
      the trace with a packet of 8 MiB put at its middle packet, whose
      unknown field (900) holds bytes that look like a run of packet
      records
  append_packets.py compresshalf TRACE OUT
      the trace with its second half of packets in compressed_packets
      (zlib) of 2000 packets each
"""
import sys

BOOT = 293400000000  # a guest BOOTTIME inside the generated traces


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(num, wt, payload):
    """A field: wire type 0 takes an int, 2 bytes."""
    key = varint(num << 3 | wt)
    if wt == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def records(data):
    """The top-level records of a trace, each as its bytes."""
    i = 0
    while i < len(data):
        j, n, shift = i + 1, 0, 0
        while True:
            c = data[j]
            j += 1
            n |= (c & 0x7f) << shift
            shift += 7
            if c < 0x80:
                break
        yield data[i:j + n]
        i = j + n


def packet(body):
    return field(1, 2, body)  # Trace.packet


def instant(ts, clock, name, first):
    # TrackEvent {type INSTANT, track_uuid, name} on sequence 4077; the
    # first one also describes its track.
    te = field(9, 0, 3) + field(11, 0, 0x7e57) + field(23, 2, name)
    body = field(8, 0, ts) + field(58, 0, clock) + field(10, 0, 4077)
    if first:
        td = field(1, 0, 0x7e57) + field(2, 2, b"offsets")
        body += field(41, 0, 1) + field(60, 2, td)
    return packet(body + field(11, 2, te))


def bundle(seq, cpu, events):
    b = field(1, 0, cpu) + b"".join(field(2, 2, e) for e in events)
    return packet(field(10, 0, seq) + field(1, 2, b))


def switch(ts, prev, nxt):
    sw = (field(1, 2, b"a") + field(2, 0, prev) + field(4, 0, 1) +
          field(5, 2, b"b") + field(6, 0, nxt))
    return field(1, 0, ts) + field(2, 0, prev) + field(4, 2, sw)


def printev(ts, pid, buf):
    return field(1, 0, ts) + field(2, 0, pid) + field(3, 2, field(2, 2, buf))


def append(src, dst, extra):
    with open(src, "rb") as f:
        data = f.read()
    with open(dst, "wb") as f:
        f.write(data + extra)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "realtime":
        append(sys.argv[2], sys.argv[3],
               instant(BOOT, 6, b"boot_tick", True) +
               instant(BOOT + 1700000000000000000, 1, b"rt_tick", False))
    elif len(sys.argv) == 6 and sys.argv[1] == "ftrace":
        append(sys.argv[2], sys.argv[4],
               bundle(4091, 3, [switch(BOOT - 5000000, 0, 77),
                                switch(BOOT + 5000000, 77, 0)]))
        append(sys.argv[3], sys.argv[5],
               bundle(4092, 1, [printev(BOOT, 1234, b"B|1234|vp_work\n"),
                                printev(BOOT + 1000, 1234, b"E|1234\n")]))
    elif len(sys.argv) == 6 and sys.argv[1] == "bigwhole":
        part, size = sys.argv[4], int(sys.argv[5]) << 20
        seq = field(10, 0, 4079)
        if part == "snapshot":
            # ClockSnapshot.clocks {clock_id, timestamp}
            clock = field(1, 2, field(1, 0, 100) + field(2, 0, BOOT))
            body = field(8, 0, BOOT) + field(6, 2, clock * (size // len(clock)))
        elif part == "defaults":
            body = field(8, 0, BOOT) + field(59, 2, field(58, 0, 6) +
                                             field(9000, 2, bytes(size)))
        else:
            body = field(1, 2, field(1, 0, 1) + field(
                2, 2, printev(BOOT, 1234, b"x" * size)))
        append(sys.argv[2], sys.argv[3], packet(body + seq))
    elif len(sys.argv) == 5 and sys.argv[1] == "bigpacket":
        append(sys.argv[2], sys.argv[3],
               packet(field(9000, 2, bytes(int(sys.argv[4]) << 20))))
    elif len(sys.argv) == 6 and sys.argv[1] == "bigbundle":
        events, size = [], 0
        while size < int(sys.argv[5]) << 20:
            n = len(events)
            events.append(field(2, 2, switch(BOOT + 100 * n, 100 + n % 50,
                                             200 + n % 50)))
            size += len(events[-1])
        one = field(1, 0, 1)  # the bundle's cpu
        append(sys.argv[2], sys.argv[3], packet(
            field(10, 0, 7) + field(1, 2, one + b"".join(events))))
        append(sys.argv[2], sys.argv[4], b"".join(
            packet(field(10, 0, 7) +
                   field(1, 2, one + b"".join(events[i:i + 1000])))
            for i in range(0, len(events), 1000)))
    elif len(sys.argv) == 6 and sys.argv[1] == "bigcompressed":
        import zlib
        inner = b"".join(
            packet(field(8, 0, BOOT + 10 * i) + field(10, 0, 9) +
                   field(9000, 2, b"x" * 8))
            for i in range(int(sys.argv[5])))
        append(sys.argv[2], sys.argv[3],
               packet(field(10, 0, 9) + field(50, 2, zlib.compress(inner))))
        append(sys.argv[2], sys.argv[4], inner)
    elif len(sys.argv) == 6 and sys.argv[1] == "bigevent":
        def value(name, v):  # DebugAnnotation {name (10), uint_value (3)}
            return field(4, 2, field(10, 2, name) + field(3, 0, v))
        for out, size in ((sys.argv[3], int(sys.argv[5]) << 20),
                          (sys.argv[4], 8)):
            # TrackEvent {type, categories, name, annotations}
            te = (field(9, 0, 3) + field(22, 2, b"cros") +
                  field(23, 2, b"guest_clock_sync") +
                  field(4, 2, field(10, 2, b"blob") +
                        field(6, 2, b"x" * size)) +
                  value(b"clock_sync_cputime", 1234567) +
                  value(b"clock_sync_boottime", BOOT))
            append(sys.argv[2], out, packet(
                field(8, 0, BOOT) + field(10, 0, 4077) + field(11, 2, te)))
    elif len(sys.argv) == 5 and sys.argv[1] == "biginterned":
        n = (int(sys.argv[4]) << 20) // 1010
        names = b"".join(  # InternedData.event_names {iid, name}
            field(2, 2, field(1, 0, i + 1) + field(2, 2, b"n" * 1000))
            for i in range(n))
        append(sys.argv[2], sys.argv[3], packet(
            field(8, 0, BOOT) + field(10, 0, 4078) + field(12, 2, names) +
            field(13, 0, 1)))
    elif len(sys.argv) == 5 and sys.argv[1] == "bigtree":
        n = (int(sys.argv[4]) << 20) // 1012
        procs = b"".join(  # ProcessTree.processes {pid, ppid, cmdline}
            field(1, 2, field(1, 0, 10000 + i) + field(2, 0, 1) +
                  field(3, 2, b"c" * 1000))
            for i in range(n))
        append(sys.argv[2], sys.argv[3], packet(
            field(8, 0, BOOT) + field(10, 0, 4079) + field(2, 2, procs)))
    elif len(sys.argv) == 6 and sys.argv[1] == "bomb":
        import zlib
        # TrackEvent {type INSTANT, name, debug_annotations {name, string}}
        te = (field(9, 0, 3) + field(23, 2, b"bomb") +
              field(4, 2, field(10, 2, b"zeros") +
                    field(6, 2, bytes(int(sys.argv[5]) << 20))))
        inner = (packet(field(8, 0, BOOT) + field(10, 0, 9) +
                        field(11, 2, te)) +
                 packet(field(8, 0, BOOT + 10) + field(10, 0, 9) +
                        field(9000, 2, b"after")))
        append(sys.argv[2], sys.argv[3],
               packet(field(10, 0, 9) + field(50, 2, zlib.compress(inner))))
        append(sys.argv[2], sys.argv[4], inner)
    elif len(sys.argv) == 6 and sys.argv[1] == "randcompressed":
        import random
        import zlib
        rng = random.Random(5)
        n = (int(sys.argv[5]) << 20) // 1020
        inner = b"".join(
            packet(field(8, 0, BOOT + 10 * i) + field(10, 0, 9) +
                   field(9000, 2, rng.randbytes(1000)))
            for i in range(n))
        append(sys.argv[2], sys.argv[3],
               packet(field(10, 0, 9) + field(50, 2, zlib.compress(inner, 1))))
        append(sys.argv[2], sys.argv[4], inner)
    elif len(sys.argv) == 4 and sys.argv[1] == "badinside":
        import zlib
        inner = packet(field(8, 0, BOOT) + field(10, 0, 9) +
                       field(9000, 2, bytes(2 << 20)) + b"\x0f\xff")
        append(sys.argv[2], sys.argv[3],
               packet(field(10, 0, 9) + field(50, 2, zlib.compress(inner))))
    elif len(sys.argv) == 5 and sys.argv[1] == "sequences":
        # timestamp (8) and trusted_packet_sequence_id (10)
        append(sys.argv[2], sys.argv[3], b"".join(
            packet(field(8, 0, 10**9 + i) + field(10, 0, 100000 + i))
            for i in range(int(sys.argv[4]))))
    elif len(sys.argv) == 4 and sys.argv[1] in ("fakemiddle", "compresshalf"):
        import zlib
        with open(sys.argv[2], "rb") as f:
            recs = list(records(f.read()))
        half = len(recs) // 2
        if sys.argv[1] == "fakemiddle":
            fake = b"\x0a\x05AAAAA" * ((8 << 20) // 7)
            rest = [packet(field(10, 0, 77) + field(900, 2, fake))]
            rest += recs[half:]
        else:
            rest = [packet(field(10, 0, 1) + field(50, 2, zlib.compress(
                b"".join(recs[k:k + 2000]))))
                for k in range(half, len(recs), 2000)]
        with open(sys.argv[3], "wb") as f:
            f.write(b"".join(recs[:half] + rest))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
