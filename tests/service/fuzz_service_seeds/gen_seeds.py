#!/usr/bin/env python3
"""gen_seeds.py - writes the seed inputs of fuzz_service (see the script
format at the top of tests/service/fuzz_service.c) into this directory.

    python3 tests/service/fuzz_service_seeds/gen_seeds.py
"""
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field_varint(num, v):
    return varint(num << 3) + varint(v)


def field_bytes(num, b):
    return varint(num << 3 | 2) + varint(len(b)) + b


def u16(v):
    return struct.pack('<H', v)


def rv(n):
    """4-byte redundant varint of a fragment length."""
    return bytes([0x80 | (n & 0x7F), 0x80 | ((n >> 7) & 0x7F),
                  0x80 | ((n >> 14) & 0x7F), (n >> 21) & 0x7F])


def setup(smb=2, page=0, kb=16, policy=1):
    return bytes([4, smb, page, kb, policy])


# packets: count (low 5 bits) | chunk flags << 5.
def chunk(payload, layout=0, writer=1, cid=0, packets=1, target=1, flags=0):
    return bytes([6, layout, writer, cid, packets, target, flags]) + \
        u16(len(payload)) + payload


def packet(i):
    # TracePacket { for_testing 900 { seq_value 1 }, timestamp 8 }
    body = field_varint(8, 1000 + i) + field_bytes(900, field_varint(1, i))
    return rv(len(body)) + body


def forged(i, num, value):
    """A packet(i) that also carries field num, which only the service may
    write (bytes value: length-delimited, else varint)."""
    body = field_varint(8, 1000 + i) + field_bytes(900, field_varint(1, i))
    if isinstance(value, bytes):
        body += field_bytes(num, value)
    else:
        body += field_varint(num, value)
    return rv(len(body)) + body


def invoke(conn, method, args, flags=0):
    return bytes([2 if conn == 'p' else 3, method, flags]) + \
        u16(len(args)) + args


def notify(iid):
    return bytes([7, iid])


SEEDS = {
    # A producer with shared memory, a session, three chunks, a read.
    'session_chunks': setup() + notify(1) +
    chunk(b''.join(packet(i) for i in range(3)), cid=0, packets=3) +
    chunk(packet(3), cid=1) + chunk(packet(4), cid=2, packets=1),
    # Hostile commits: a chunk index past the layout, a page past the end,
    # an inline chunk, a buffer the producer may not write.
    'hostile_commit': setup(kb=4, policy=2) + notify(1) +
    chunk(packet(0), flags=0x80 | 0x3e) +
    chunk(packet(1), flags=0x80 | 0x40, target=1) +
    chunk(packet(2), target=3) +
    bytes([5, 0, 0, 0, 8]) + b'\xff' * 8 +
    chunk(packet(3), cid=7),
    # Consumer queries: GetTraceStats (9), QueryServiceState (11),
    # QueryCapabilities (12), Flush (4), DisableTracing (1), FreeBuffers (3).
    'consumer_calls': setup(kb=8) + invoke('c', 9, b'') +
    invoke('c', 11, b'') + invoke('c', 12, b'') +
    invoke('c', 4, field_varint(1, 100)) + invoke('c', 1, b'') +
    invoke('c', 3, b''),
    # Producer methods with odd arguments, raw garbage frames.
    'producer_calls': invoke('p', 5, field_varint(1, 7) + field_varint(2, 1)) +
    invoke('p', 9, field_bytes(1, b'trig')) + invoke('p', 10, b'') +
    invoke('p', 2, field_bytes(1, b'nope')) + invoke('p', 40, b'x') +
    bytes([0]) + u16(3) + b'\x10\x01\x1a' +
    bytes([1]) + u16(2) + b'\xff\xff',
    # Packets carrying fields only the service may write (trusted_uid,
    # trusted_packet_sequence_id, trace_config, compressed_packets holding
    # a zlib Trace, machine_id, zstd_compressed_packets) between good ones.
    'forged_fields': setup(kb=16) + notify(1) +
    chunk(packet(0) + forged(1, 3, 0) + forged(2, 10, 1) + packet(3),
          packets=4, cid=0) +
    chunk(forged(4, 33, field_varint(1, 1)) +
          forged(5, 50, zlib.compress(field_bytes(1, packet(6)[4:]))),
          packets=2, cid=1) +
    chunk(forged(7, 98, 1) + forged(8, 133, b'\x28\xb5\x2f\xfd'),
          packets=2, cid=2),
    # A chunk spanning packets across chunks, then detach.
    'fragments': setup(page=1, kb=32) + notify(1) +
    chunk(rv(20) + b'A' * 10, packets=1, flags=0, cid=0) +
    chunk(rv(5) + b'B' * 5, packets=1 | 1 << 5, cid=1) +
    invoke('c', 7, field_bytes(1, b'key')),
}

for name, data in SEEDS.items():
    with open(os.path.join(HERE, name), 'wb') as f:
        f.write(data)
