#!/usr/bin/env python3
"""fake_consumer_service.py - a scripted stand-in for vtraced's ConsumerPort,
for testing the vperfetto command's side of the protocol without a service.

usage: fake_consumer_service.py SOCKET MODE LOG

Serves one connection on the UNIX socket SOCKET, speaking Perfetto's IPC
framing (4-byte little-endian length + IPCFrame) with hand-encoded protobuf.
MODE picks the script:
  trace     EnableTracing ends after duration_ms; ReadBuffers streams three
            packets over two replies, the first split across two slices
  stop      EnableTracing ends only on DisableTracing (after a Flush)
  error     EnableTracing is answered with an error
  into      write_into_file: writes two packets into the passed fd
  query     QueryServiceState streams producers, then data sources
  hangup    closes the connection after EnableTracing
  stuck     like stop, but Flush and DisableTracing are never answered
Detach is answered; Attach returns a config with duration_ms 200, and the
EnableTracing(attach_notification_only) that follows ends after 200 ms.
Every method received is appended to LOG, one name per line.
"""
import os
import socket
import struct
import sys
import time

METHODS = ["EnableTracing", "DisableTracing", "ReadBuffers", "FreeBuffers",
           "Flush", "QueryServiceState", "Detach", "Attach"]

PACKETS = [b"\x08\x01" + b"A" * 300, b"\x08\x02BB", b"\x08\x03" + b"C" * 70000]


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field_varint(num, v):
    return varint(num << 3) + varint(v)


def field_bytes(num, b):
    return varint(num << 3 | 2) + varint(len(b)) + b


def parse(buf):
    """{field number: [values]} of one message (varints and LEN only)."""
    out, i = {}, 0
    while i < len(buf):
        tag, i = read_varint(buf, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        out.setdefault(num, []).append(v)
    return out


def read_varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


class Conn:
    def __init__(self, sock, log):
        self.sock, self.log, self.buf, self.fds = sock, log, b"", []

    def send_frame(self, request_id, body):
        frame = field_varint(2, request_id) + body
        self.sock.sendall(struct.pack("<I", len(frame)) + frame)

    def reply(self, request_id, data=b"", has_more=False, success=True):
        r = field_varint(1, 1 if success else 0)
        if has_more:
            r += field_varint(2, 1)
        r += field_bytes(3, data)
        self.send_frame(request_id, field_bytes(6, r))

    def read_frame(self, timeout=None):
        self.sock.settimeout(timeout)
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack("<I", self.buf[:4])[0]:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, 65536, 4)
            except socket.timeout:
                return None
            if not data:
                raise EOFError
            self.fds += fds
            self.buf += data
        n = struct.unpack("<I", self.buf[:4])[0]
        frame, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
        return parse(frame)


def slices_reply(slices):
    body = b""
    for data, last in slices:
        s = field_bytes(1, data)
        if last:
            s += field_varint(2, 1)
        body += field_bytes(2, s)
    return body


def main():
    path, mode, log_path = sys.argv[1:4]
    log = open(log_path, "a", buffering=1)
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    srv.settimeout(20)
    sock, _ = srv.accept()
    c = Conn(sock, log)
    enable_id = None
    end_at = None
    try:
        while True:
            timeout = None if end_at is None else max(0, end_at - time.time())
            f = c.read_frame(timeout)
            if f is None:  # the session's duration is over
                c.reply(enable_id, b"")
                end_at = None
                continue
            rid = f.get(2, [0])[0]
            if 3 in f:
                m = b"".join(field_bytes(3, field_varint(1, i + 1) + field_bytes(2, n.encode()))
                             for i, n in enumerate(METHODS))
                c.send_frame(rid, field_bytes(4, field_varint(1, 1) + field_varint(2, 1) + m))
                continue
            inv = parse(f[5][0])
            method = METHODS[inv[2][0] - 1]
            args = parse(inv.get(3, [b""])[0])
            log.write(method + "\n")
            if method == "EnableTracing":
                enable_id = rid
                cfg = parse(args.get(1, [b""])[0])
                if args.get(2, [0])[0]:  # attach_notification_only
                    cfg = {3: [200]}
                log.write("duration_ms=%d fds=%d\n" % (cfg.get(3, [0])[0], len(c.fds)))
                if mode == "error":
                    c.reply(rid, field_bytes(3, b"no such data source: foo"))
                elif mode == "hangup":
                    sock.close()
                    return
                elif mode == "into":
                    fd = c.fds.pop(0)
                    for p in PACKETS[:2]:
                        os.write(fd, b"\x0a" + varint(len(p)) + p)
                    os.close(fd)
                    end_at = time.time() + cfg.get(3, [0])[0] / 1000.0
                elif mode not in ("stop", "stuck"):
                    end_at = time.time() + cfg.get(3, [0])[0] / 1000.0
            elif mode == "stuck" and method in ("Flush", "DisableTracing"):
                pass
            elif method == "Flush":
                c.reply(rid)
            elif method == "DisableTracing":
                c.reply(rid)
                c.reply(enable_id, field_varint(1, 1))
            elif method == "ReadBuffers":
                a, b, cc = PACKETS
                c.reply(rid, slices_reply([(a[:100], False), (a[100:], True), (b, True)]),
                        has_more=True)
                c.reply(rid, slices_reply([(cc[:40000], False)]), has_more=True)
                c.reply(rid, slices_reply([(cc[40000:], True)]))
            elif method in ("FreeBuffers", "Detach"):
                if method == "Detach":
                    log.write("key=%s\n" % args.get(1, [b""])[0].decode())
                c.reply(rid)
            elif method == "Attach":
                log.write("key=%s\n" % args.get(1, [b""])[0].decode())
                c.reply(rid, field_bytes(1, field_varint(3, 200)))
            elif method == "QueryServiceState":
                p1 = field_varint(1, 1) + field_bytes(2, b"vtraced_probes") + \
                    field_varint(3, 1000) + field_varint(5, 4242)
                c.reply(rid, field_bytes(1, field_bytes(1, p1)), has_more=True)
                d1 = field_bytes(1, field_bytes(1, b"linux.ftrace")) + field_varint(2, 1)
                c.reply(rid, field_bytes(1, field_bytes(2, d1) +
                                         field_bytes(5, b"vtraced-test")))
    except EOFError:
        pass


if __name__ == "__main__":
    main()
