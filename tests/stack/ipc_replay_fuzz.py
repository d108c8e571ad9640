#!/usr/bin/env python3
"""ipc_replay_fuzz.py - throws mutated and malformed IPC frames at a live
vtraced (tests/stack/stack_test.sh, step 7).

Seeds are frames captured from a real SDK producer (VPERFETTO_IPC_CAPTURE:
NNNNNN-tx.bin files, each an IPCFrame without its 4-byte length).  Each
connection replays a capture with mutations (bit flips, truncation,
inserted/deleted bytes, lying length prefixes, random method ids and
arguments, stray file descriptors) or plain garbage, to the producer and
the consumer socket, and reads whatever comes back.  The service must stay
up; the caller checks that afterwards.  Deterministic for a given --seed.
"""
import argparse
import array
import glob
import os
import random
import socket
import struct
import sys
import time


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
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def field_varint(num, v):
    return varint(num << 3) + varint(v)


def bind_frame(req_id, service):
    return field_varint(2, req_id) + field_len(3, field_len(1, service.encode()))


def invoke_frame(req_id, service_id, method_id, args, drop=False):
    body = field_varint(1, service_id) + field_varint(2, method_id)
    body += field_len(3, args)
    if drop:
        body += field_varint(4, 1)
    return field_varint(2, req_id) + field_len(5, body)


def mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        if op == 0 and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and data:
            del data[rng.randrange(len(data)):]
        elif op == 2:
            i = rng.randrange(len(data) + 1)
            data[i:i] = os.urandom(rng.randint(1, 16))
        elif op == 3 and data:
            i = rng.randrange(len(data))
            del data[i:i + rng.randint(1, 8)]
        else:
            i = rng.randrange(len(data) + 1)
            data[i:i] = varint(rng.choice([0, 1, 127, 128, 2**31, 2**63]))
    return bytes(data)


def framed(payload, rng, lie=False):
    n = len(payload)
    if lie:
        n = rng.choice([0, n + 1, n * 2 + 7, 2**31 - 1, 2**32 - 1, 64 << 20])
    return struct.pack('<I', n & 0xFFFFFFFF) + payload


def send(sock, data, rng):
    """Sends data, sometimes with a stray fd, sometimes in pieces."""
    try:
        if rng.random() < 0.1:
            fd = os.open('/dev/null', os.O_RDONLY)
            try:
                sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                       array.array('i', [fd] * rng.randint(1, 8)))])
            finally:
                os.close(fd)
        elif rng.random() < 0.2 and len(data) > 2:
            cut = rng.randrange(1, len(data))
            sock.sendall(data[:cut])
            sock.sendall(data[cut:])
        else:
            sock.sendall(data)
        return True
    except OSError:
        return False


def drain(sock):
    sock.settimeout(0.02)
    got = 0
    try:
        while True:
            b = sock.recv(65536)
            if not b:
                break
            got += len(b)
    except OSError:
        pass
    return got


def one_connection(rng, addr, seeds, consumer):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(addr)
    except OSError:
        return 'connect-failed'
    kind = rng.randrange(6)
    try:
        if kind == 0:  # garbage
            send(s, os.urandom(rng.randint(1, 4096)), rng)
        elif kind == 1 and seeds and not consumer:  # mutated capture replay
            for i, frame in enumerate(seeds[:rng.randint(1, len(seeds))]):
                if i > 0 and rng.random() < 0.5:
                    frame = mutate(rng, frame)
                if not send(s, framed(frame, rng, lie=rng.random() < 0.05), rng):
                    break
                if rng.random() < 0.3:
                    drain(s)
        elif kind == 2:  # bind, then random method ids and arguments
            svc = 'ConsumerPort' if consumer else 'ProducerPort'
            send(s, framed(bind_frame(1, svc), rng), rng)
            drain(s)
            for r in range(rng.randint(1, 20)):
                args = os.urandom(rng.randint(0, 256))
                f = invoke_frame(r + 2, rng.choice([0, 1, 2, 99]),
                                 rng.randint(0, 40), args,
                                 drop=rng.random() < 0.3)
                send(s, framed(f, rng), rng)
            drain(s)
        elif kind == 3:  # a lying length prefix, then hang up
            send(s, framed(os.urandom(rng.randint(0, 64)), rng, lie=True), rng)
        elif kind == 4:  # binds to unknown services, mutated binds
            f = bind_frame(1, rng.choice(['', 'Nope', 'ProducerPort\x00x']))
            send(s, framed(mutate(rng, f) if rng.random() < 0.5 else f, rng), rng)
            drain(s)
        else:  # connect and leave at once, or a half frame
            if rng.random() < 0.5:
                send(s, b'\x10\x00', rng)
        drain(s)
    finally:
        s.close()
    return 'kind%d' % kind


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--producer', required=True)
    ap.add_argument('--consumer', required=True)
    ap.add_argument('--captures', required=True)
    ap.add_argument('--seconds', type=float, default=10)
    ap.add_argument('--seed', type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    seeds = [open(p, 'rb').read()
             for p in sorted(glob.glob(os.path.join(a.captures, '*-tx.bin')))]
    deadline = time.time() + a.seconds
    counts = {}
    n = 0
    while time.time() < deadline:
        consumer = rng.random() < 0.3
        what = one_connection(rng, a.consumer if consumer else a.producer,
                              seeds, consumer)
        counts[what] = counts.get(what, 0) + 1
        n += 1
    print('ipc_replay_fuzz: %d connections, %d seed frames' % (n, len(seeds)))
    print('ipc_replay_fuzz: ' + ', '.join('%s=%d' % kv for kv in sorted(counts.items())))
    if counts.get('connect-failed', 0) > n // 2:
        print('ipc_replay_fuzz: the service stopped accepting connections')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
