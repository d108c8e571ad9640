#!/usr/bin/env python3
"""trigger_tool.py - the helpers of triggers_e2e.sh.

  trigger_tool.py PROTOS activate SOCKET PRODUCER_NAME TRIGGER...
      connects to a ProducerPort socket as producer PRODUCER_NAME (as
      Perfetto's `perfetto --trigger` / trigger_perfetto do: a producer
      that only calls ActivateTriggers), activates the triggers and waits
      for the reply; exit 0 when the service answered with success.
  trigger_tool.py PROTOS summary TRACE
      prints, one per line: packets N, the trace_config's duration_ms,
      each TracePacket.trigger (name, producer, uid, stop_delay_ms,
      timestamp, and whether it is on the service's sequence), and the
      first and last track_event timestamps.

Field numbers are read by name from the .proto files under PROTOS (the
tree's protos/), never typed here.
"""
import functools
import re
import socket
import struct
import sys

# ---- field numbers from the schema -------------------------------------------

_texts = {}


def _block(text, name):
    """The body of `message NAME { ... }` at the top level of text."""
    depth = 0
    i = 0
    pat = re.compile(r'\bmessage\s+' + re.escape(name) + r'\s*\{')
    while i < len(text):
        m = pat.search(text, i)
        if not m:
            return None
        depth = text.count('{', 0, m.start()) - text.count('}', 0, m.start())
        if depth == 0:
            start = m.end()
            d = 1
            j = start
            while d:
                d += {'{': 1, '}': -1}.get(text[j], 0)
                j += 1
            return text[start:j - 1]
        i = m.end()
    return None


@functools.lru_cache(maxsize=None)
def field(protos, path, dotted):
    """The number of field dotted ("Msg.Sub.field") in PROTOS/path."""
    key = protos + '/' + path
    if key not in _texts:
        t = open(key).read()
        _texts[key] = re.sub(r'//[^\n]*', '', t)
    text = _texts[key]
    *msgs, name = dotted.split('.')
    for m in msgs:
        text = _block(text, m)
        if text is None:
            raise SystemExit('no message %s in %s' % (dotted, path))
    # Fields of this message only: drop the nested messages' bodies.
    flat = re.sub(r'\bmessage\s+\w+\s*\{', '\0', text)
    out, depth = [], 0
    for ch in flat:
        if ch == '\0':
            depth += 1
            continue
        if depth:
            depth += {'{': 1, '}': -1}.get(ch, 0)
            continue
        out.append(ch)
    m = re.search(r'\b' + re.escape(name) + r'\s*=\s*(\d+)\s*[;\[]',
                  ''.join(out))
    if not m:
        raise SystemExit('no field %s in %s' % (dotted, path))
    return int(m.group(1))


# ---- protobuf wire -------------------------------------------------------------

def varint(v):
    out = b''
    while v >= 0x80:
        out += bytes([(v & 0x7f) | 0x80])
        v >>= 7
    return out + bytes([v])


def put_varint(num, v):
    return varint(num << 3) + varint(v)


def put_bytes(num, b):
    return varint(num << 3 | 2) + varint(len(b)) + b


def read_varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(number, wire type, value) of each field of message b."""
    i = 0
    while i < len(b):
        tag, i = read_varint(b, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = read_varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = read_varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError('wire type %d' % wt)
        yield num, wt, v


# ---- activate --------------------------------------------------------------------

class Conn:
    """One IPC connection: Perfetto's framing (4-byte little-endian
    length, then an IPCFrame)."""

    def __init__(self, protos, path):
        self.protos = protos
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(10)
        self.s.connect(path)

    def f(self, dotted):
        return field(self.protos, 'perfetto/ipc/ipc.proto',
                     'IPCFrame.' + dotted)

    def send(self, rid, body):
        frame = put_varint(self.f('request_id'), rid) + body
        self.s.sendall(struct.pack('<I', len(frame)) + frame)

    def _read(self, n):
        out = b''
        while len(out) < n:
            c = self.s.recv(n - len(out))
            if not c:
                raise SystemExit('the service closed the connection')
            out += c
        return out

    def recv(self):
        n = struct.unpack('<I', self._read(4))[0]
        return {num: v for num, _, v in fields(self._read(n))}

    def bind(self, service):
        self.send(1, put_bytes(self.f('msg_bind_service'),
                               put_bytes(self.f('BindService.service_name'),
                                         service.encode())))
        reply = self.recv()[self.f('msg_bind_service_reply')]
        self.sid, self.methods = None, {}
        for n, _, v in fields(reply):
            if n == self.f('BindServiceReply.service_id'):
                self.sid = v
            elif n == self.f('BindServiceReply.methods'):
                m = {n2: v2 for n2, _, v2 in fields(v)}
                name = m[self.f('BindServiceReply.MethodInfo.name')]
                self.methods[name.decode()] = \
                    m[self.f('BindServiceReply.MethodInfo.id')]

    def invoke(self, rid, method, args):
        body = (put_varint(self.f('InvokeMethod.service_id'), self.sid) +
                put_varint(self.f('InvokeMethod.method_id'),
                           self.methods[method]) +
                put_bytes(self.f('InvokeMethod.args_proto'), args))
        self.send(rid, put_bytes(self.f('msg_invoke_method'), body))
        frame = self.recv()
        reply = frame.get(self.f('msg_invoke_method_reply'))
        if reply is None:
            return False
        r = {n: v for n, _, v in fields(reply)}
        return r.get(self.f('InvokeMethodReply.success'), 0) == 1


def activate(protos, path, producer, triggers):
    pp = 'perfetto/ipc/producer_port.proto'
    c = Conn(protos, path)
    c.bind('ProducerPort')
    name = field(protos, pp, 'InitializeConnectionRequest.producer_name')
    if not c.invoke(2, 'InitializeConnection',
                    put_bytes(name, producer.encode())):
        raise SystemExit('InitializeConnection failed')
    num = field(protos, pp, 'ActivateTriggersRequest.trigger_names')
    args = b''.join(put_bytes(num, t.encode()) for t in triggers)
    if not c.invoke(3, 'ActivateTriggers', args):
        raise SystemExit('ActivateTriggers failed')


# ---- summary ---------------------------------------------------------------------

def summary(protos, path):
    tr = 'perfetto/trace/trace.proto'
    cf = 'perfetto/config/config.proto'
    P = lambda d: field(protos, tr, 'TracePacket.' + d)  # noqa: E731
    T = lambda d: field(protos, tr, 'Trigger.' + d)  # noqa: E731
    packet = field(protos, tr, 'Trace.packet')
    data = open(path, 'rb').read()
    n = 0
    events = []
    lines = []
    duration = None
    for num, wt, pkt in fields(data):
        if num != packet or wt != 2:
            continue
        n += 1
        f = {}
        for k, _, v in fields(pkt):
            f[k] = v
        if P('trace_config') in f:
            for k, _, v in fields(f[P('trace_config')]):
                if k == field(protos, cf, 'TraceConfig.duration_ms'):
                    duration = v
        if P('track_event') in f and P('timestamp') in f:
            events.append(f[P('timestamp')])
        if P('trigger') in f:
            t = {k: v for k, _, v in fields(f[P('trigger')])}
            uid = t.get(T('trusted_producer_uid'), -1)
            if uid >= 1 << 63:
                uid -= 1 << 64
            lines.append('trigger %s producer=%s uid=%d delay=%d ts=%d '
                         'seq=%d' % (
                             t.get(T('trigger_name'), b'').decode(),
                             t.get(T('producer_name'), b'').decode(),
                             uid, t.get(T('stop_delay_ms'), -1),
                             f.get(P('timestamp'), 0),
                             f.get(P('trusted_packet_sequence_id'), 0)))
    print('packets %d' % n)
    print('duration_ms %s' % ('-' if duration is None else duration))
    for line in lines:
        print(line)
    print('track_events %d' % len(events))
    if events:
        print('first_event %d' % min(events))
        print('last_event %d' % max(events))


def main():
    if len(sys.argv) >= 5 and sys.argv[2] == 'activate':
        activate(sys.argv[1], sys.argv[3], sys.argv[4], sys.argv[5:])
    elif len(sys.argv) == 4 and sys.argv[2] == 'summary':
        summary(sys.argv[1], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
