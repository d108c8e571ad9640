#!/usr/bin/env python3
"""tp_bench.py - load-speed and memory benchmark of vperfetto_tp.

Generates a trace of N track events (default 10 million) with
vperfetto_tp_gen in a temporary directory, loads it with
    vperfetto_tp TRACE -Q "select count(*) from slice"
under /usr/bin/time -v (or getrusage when that is missing), and prints in
one run: trace size, load time, events/s and peak RSS with the targets
(>= 2M events/s, peak RSS <= 3x the trace size).  For scale, it then
exports the slice rows to CSV with vperfetto_tp and times Debian's sqlite3
CLI importing that CSV into an in-memory database, and prints the ratio.

usage: tp_bench.py [--events N] [--threads N] [--bin-dir DIR] [--keep]
Exit status: 0 when both targets are met, 1 when one is missed, 2 on error.
"""
import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

TARGET_EVENTS_PER_S = 2e6
TARGET_RSS_RATIO = 3.0


def find_binary(bin_dir, name):
    """The binary `name` in bin_dir or the build tree under it."""
    for sub in ('', 'processor', 'tests'):
        p = os.path.join(bin_dir, sub, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    p = shutil.which(name)
    if p:
        return p
    sys.exit(f'tp_bench: {name} not found under {bin_dir} (use --bin-dir)')


def run_measured(cmd, stdout=subprocess.DEVNULL):
    """Runs cmd; returns (wall seconds, peak RSS bytes, stderr text)."""
    gnu_time = '/usr/bin/time'
    use_time = os.access(gnu_time, os.X_OK)
    full = [gnu_time, '-v'] + cmd if use_time else cmd
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(full, stdout=stdout, stderr=subprocess.PIPE)
    wall = time.monotonic() - t0
    err = p.stderr.decode('utf-8', 'replace')
    if p.returncode != 0:
        sys.stderr.write(err)
        sys.exit(f'tp_bench: {" ".join(cmd)} exited {p.returncode}')
    rss = None
    if use_time:
        m = re.search(r'Maximum resident set size \(kbytes\): (\d+)', err)
        if m:
            rss = int(m.group(1)) * 1024
    if rss is None:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # ru_maxrss is the largest child so far (KiB on Linux).
        rss = max(after.ru_maxrss, before.ru_maxrss) * 1024
    return wall, rss, err


def mb(n):
    return f'{n / 1e6:,.1f} MB'


def verdict(ok):
    return 'OK' if ok else 'MISSED'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--events', type=int, default=10_000_000)
    ap.add_argument('--threads', type=int, default=8)
    ap.add_argument('--bin-dir', default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), '..', '..', 'build'))
    ap.add_argument('--keep', action='store_true',
                    help='keep the temporary directory')
    ap.add_argument('--no-sqlite', action='store_true',
                    help='skip the sqlite3 comparison')
    a = ap.parse_args()

    tp = find_binary(a.bin_dir, 'vperfetto_tp')
    gen = find_binary(a.bin_dir, 'vperfetto_tp_gen')
    tmp = tempfile.mkdtemp(prefix='tp_bench.')
    try:
        return bench(a, tp, gen, tmp)
    finally:
        if a.keep:
            print(f'kept {tmp}')
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def bench(a, tp, gen, tmp):
    trace = os.path.join(tmp, 'trace.pb')
    events = a.events // 2 * 2
    print(f'generating {events:,} events on {a.threads} threads ...',
          flush=True)
    subprocess.run([gen, '-n', str(events), '-o', trace,
                    '--threads', str(a.threads)],
                   check=True, stdout=subprocess.DEVNULL)
    size = os.path.getsize(trace)

    out = os.path.join(tmp, 'count.csv')
    with open(out, 'wb') as f:
        wall, rss, _ = run_measured(
            [tp, '--quiet', trace, '-Q', 'select count(*) from slice'],
            stdout=f)
    with open(out) as f:
        lines = f.read().split()
    slices = int(lines[-1]) if lines else -1
    eps = events / wall if wall > 0 else float('inf')
    ratio = rss / size if size else float('inf')
    ok_speed = eps >= TARGET_EVENTS_PER_S
    ok_rss = ratio <= TARGET_RSS_RATIO

    print()
    print(f'trace size:   {mb(size)} ({events:,} events, {size / events:.1f}'
          f' bytes/event)')
    print(f'slices:       {slices:,} (expected {events // 2:,})')
    print(f'load time:    {wall:.2f} s (load + count query)')
    print(f'events/s:     {eps / 1e6:.2f} M   target >= '
          f'{TARGET_EVENTS_PER_S / 1e6:.0f} M   {verdict(ok_speed)}')
    print(f'peak RSS:     {mb(rss)}')
    print(f'RSS / trace:  {ratio:.2f}x   target <= {TARGET_RSS_RATIO:.0f}x'
          f'   {verdict(ok_rss)}')

    if not a.no_sqlite:
        compare_sqlite(tp, trace, tmp, wall)
    if slices != events // 2:
        print('tp_bench: wrong slice count', file=sys.stderr)
        return 2
    return 0 if ok_speed and ok_rss else 1


def compare_sqlite(tp, trace, tmp, tp_wall):
    """Times sqlite3 importing the slice rows as CSV, for scale."""
    sqlite = shutil.which('sqlite3')
    if not sqlite:
        print('\nsqlite3 comparison skipped: no sqlite3 CLI')
        return
    csv_path = os.path.join(tmp, 'slice.csv')
    t0 = time.monotonic()
    with open(csv_path, 'wb') as f:
        subprocess.run([tp, '--quiet', trace, '-Q', 'select * from slice'],
                       stdout=f, check=True)
    export_s = time.monotonic() - t0
    csv_size = os.path.getsize(csv_path)
    sq_wall, sq_rss, _ = run_measured(
        [sqlite, ':memory:', f'.import --csv {csv_path} slice',
         'select count(*) from slice;'])
    print()
    print(f'for scale: sqlite3 importing the same slice rows from CSV '
          f'({mb(csv_size)}, written by vperfetto_tp in {export_s:.2f} s)')
    print(f'sqlite3 .import: {sq_wall:.2f} s, peak RSS {mb(sq_rss)}')
    if tp_wall > 0:
        print(f'ratio:        sqlite3 import / vperfetto_tp load = '
              f'{sq_wall / tp_wall:.2f}x')


if __name__ == '__main__':
    sys.exit(main())
