#!/usr/bin/env python3
"""tp_limits.py - vperfetto_tp's memory stays bounded whatever the trace.

    tp_limits.py VPERFETTO_TP [--keep DIR]

Generates hostile traces and runs vperfetto_tp on each, measuring the
child's peak RSS (getrusage):

  bomb      compressed_packets that inflate to far more than the limit
            (--max-inflate): the load must stop with a clear error
            naming the file and the byte offset, exit 1, and stay small;
            with a higher limit the same trace loads.
  seqs      very many packet sequences, one track event each: the cost per
            sequence must stay under SEQ_BUDGET bytes (times a factor in
            ASan and TSan builds, whose shadow memory grows with the
            program's; measured as the
            difference between two sizes of the trace, so the fixed cost
            and any sanitizer's overhead per process cancel out).

Prints PASS/FAIL per check; exits 1 if any failed.
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import zlib


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def f_varint(num, v):
    return varint(num << 3) + varint(v)


def f_bytes(num, b):
    return varint(num << 3 | 2) + varint(len(b)) + b


TRACE_PACKET = 1
TP_TIMESTAMP = 8
TP_SEQ_ID = 10
TP_TRACK_EVENT = 11
TP_SEQ_FLAGS = 13
TP_COMPRESSED = 50
TP_FOR_TESTING = 900
TE_TYPE = 9
TE_NAME = 23
SEQ_INCREMENTAL_STATE_CLEARED = 1
TYPE_INSTANT = 3


def packet(body):
    return f_bytes(TRACE_PACKET, body)


def bomb_trace(path, inflated_mb_each, count):
    """count packets, each with compressed_packets that inflate to
    inflated_mb_each MiB: TracePackets of 64 KiB of padding each."""
    pad = packet(f_varint(TP_TIMESTAMP, 1000) +
                 f_bytes(TP_FOR_TESTING, b'\0' * 65536))
    inner = pad * (inflated_mb_each * 16)
    comp = zlib.compress(inner, 9)
    with open(path, 'wb') as f:
        f.write(packet(f_varint(TP_TIMESTAMP, 1) + f_varint(TP_SEQ_ID, 1)))
        for _ in range(count):
            f.write(packet(f_bytes(TP_COMPRESSED, comp)))
    return len(inner) * count


def seq_trace(path, nseq):
    """nseq sequences, each: one packet that clears the incremental state
    and carries an instant track event."""
    ev = f_varint(TE_TYPE, TYPE_INSTANT) + f_bytes(TE_NAME, b'e')
    with open(path, 'wb') as f:
        buf = bytearray()
        for i in range(nseq):
            buf += packet(f_varint(TP_TIMESTAMP, 1000 + i) +
                          f_varint(TP_SEQ_ID, i + 1) +
                          f_varint(TP_SEQ_FLAGS,
                                   SEQ_INCREMENTAL_STATE_CLEARED) +
                          f_bytes(TP_TRACK_EVENT, ev))
            if len(buf) > 1 << 20:
                f.write(buf)
                buf.clear()
        f.write(buf)


def run(cmd):
    """Runs cmd; returns (exit code, stderr, peak RSS in bytes)."""
    pid = os.fork()
    if pid == 0:
        try:
            fd = os.open(os.devnull, os.O_WRONLY)
            os.dup2(fd, 1)
            errf = os.open(cmd_err_path, os.O_WRONLY | os.O_CREAT |
                           os.O_TRUNC, 0o644)
            os.dup2(errf, 2)
            os.execv(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, ru = os.wait4(pid, 0)
    with open(cmd_err_path, encoding='utf-8', errors='replace') as f:
        err = f.read()
    return os.waitstatus_to_exitcode(status), err, ru.ru_maxrss * 1024


failures = 0


def check(name, ok, detail=''):
    global failures
    print(('PASS ' if ok else 'FAIL ') + name + (': ' + detail if detail
                                                  else ''))
    if not ok:
        failures += 1


def mib(n):
    return '%.1f MiB' % (n / 1048576.0)


SEQ_BUDGET = 1024  # bytes per packet sequence, all of vperfetto_tp's state
# Under AddressSanitizer every allocation carries redzones and freed memory
# sits in quarantine: the same state measures about twice as large.
ASAN_FACTOR = 2.5
# ThreadSanitizer keeps shadow memory beside every byte the program touches:
# measured at 2.7 times.
TSAN_FACTOR = 4


def sanitizer_factor(path):
    with open(path, 'rb') as f:
        exe = f.read()
    if b'__tsan_init' in exe:
        return TSAN_FACTOR
    if b'__asan_init' in exe:
        return ASAN_FACTOR
    return 1


def main():
    global cmd_err_path
    ap = argparse.ArgumentParser()
    ap.add_argument('tp')
    ap.add_argument('--keep')
    a = ap.parse_args()
    tmp = a.keep or tempfile.mkdtemp(prefix='tp_limits.')
    os.makedirs(tmp, exist_ok=True)
    cmd_err_path = os.path.join(tmp, 'stderr.txt')
    tp = a.tp
    q = 'select count(*) from slice'

    # ---- the compressed bomb ----
    bomb = os.path.join(tmp, 'bomb.pb')
    total = bomb_trace(bomb, 64, 32)  # 2 GiB inflated, about 2 MiB on disk
    size = os.path.getsize(bomb)
    rc, err, rss = run([tp, bomb, '--max-inflate', '256M', '-Q', q])
    check('bomb (%s inflating to %s, limit 256 MiB): exit 1' %
          (mib(size), mib(total)), rc == 1, 'exit %d, stderr: %s' %
          (rc, err.strip()[-300:]))
    check('bomb: the error names the file, the byte offset and the option',
          bomb in err and 'byte offset' in err and
          '--max-inflate' in err, err.strip()[-300:])
    check('bomb: peak RSS under 512 MiB', rss < 512 << 20, mib(rss))
    rc, err, rss = run([tp, bomb, '-Q', q])
    check('bomb with the default limit: refused, peak RSS under 2 GiB',
          rc == 1 and rss < 2048 << 20, 'exit %d, %s' % (rc, mib(rss)))
    small = os.path.join(tmp, 'small_bomb.pb')
    bomb_trace(small, 4, 4)  # 16 MiB and a few KiB of framing inflated
    rc, err, rss = run([tp, small, '--max-inflate', '17M', '-Q', q])
    check('16 MiB inflated within a 17 MiB limit loads', rc == 0,
          'exit %d: %s' % (rc, err.strip()[-300:]))
    rc, err, rss = run([tp, small, '--max-inflate', '15M', '-Q', q])
    check('16 MiB inflated past a 15 MiB limit is refused', rc == 1,
          'exit %d' % rc)

    # ---- very many sequences ----
    n1, n2 = 20000, 220000
    s1 = os.path.join(tmp, 'seqs1.pb')
    s2 = os.path.join(tmp, 'seqs2.pb')
    seq_trace(s1, n1)
    seq_trace(s2, n2)
    rc1, err1, rss1 = run([tp, s1, '-Q', q])
    rc2, err2, rss2 = run([tp, s2, '-Q', q])
    per = (rss2 - rss1) / (n2 - n1)
    budget = SEQ_BUDGET * sanitizer_factor(tp)
    check('%d sequences load' % n2, rc1 == 0 and rc2 == 0,
          'exit %d/%d %s' % (rc1, rc2, (err1 + err2).strip()[-300:]))
    check('cost per sequence under %d bytes' % budget, per < budget,
          '%.0f bytes (%s for %d, %s for %d)' %
          (per, mib(rss1), n1, mib(rss2), n2))

    if not a.keep:
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)
    return 1 if failures else 0


cmd_err_path = None

if __name__ == '__main__':
    sys.exit(main())
