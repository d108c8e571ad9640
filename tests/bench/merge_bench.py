#!/usr/bin/env python3
"""merge_bench.py - how fast vperfetto_merge is, against cat, in one run.

Two input shapes:
  small   the project's generator at a byte target: millions of small
          packets (track events, ftrace events, compact_sched) on many
          sequences;
  ftrace  an ftrace-heavy guest (tests/bench/ftrace_heavy.py): 34 KB
          compact_sched bundles, nearly all on one sequence.
For each shape, warms the page cache, then times, interleaved so machine
noise hits all alike, --runs times each (median reported):
  - cat host.pb guest.pb > copy.pb       (the same bytes read and written)
  - the same followed by sync copy.pb    (made durable, as the merge's is)
  - vperfetto_merge -q --threads N host.pb guest.pb -o merged.pb, for each N
and prints time, MB/s, the ratio to cat and peak RSS (/usr/bin/time) beside the
targets: merge within 2x cat (ftrace) or 4x cat (small packets), peak RSS
at most 64 MiB, more threads never slower than one.  --sha256 prints the
sha256 of each output (they must be equal across thread counts and stay
equal across changes that only make the merge faster).

usage: merge_bench.py [--build DIR] [--work DIR] [--shapes small,ftrace]
                      [--size-mb N] [--runs N] [--threads 1,2] [--sha256]
                      [--keep]
"""
import argparse, hashlib, os, statistics, subprocess, sys, time

TARGET_RATIO = {"small": 4.0, "ftrace": 2.0}


TIME = "/usr/bin/time"


def timed(cmd, stdout=subprocess.DEVNULL):
    """Runs cmd; returns (seconds, peak RSS KiB).  The RSS comes from
    /usr/bin/time when there is one: wait4 on a child of this process would
    count the Python interpreter it was forked from."""
    rss_file = None
    if os.access(TIME, os.X_OK):
        rss_file = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                f"merge_bench_rss.{os.getpid()}")
        cmd = [TIME, "-q", "-f", "%M", "-o", rss_file] + cmd
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    t = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if p.returncode:
        sys.exit(f"{cmd[0]} failed ({p.returncode}): {err}")
    rss = ru.ru_maxrss
    if rss_file:
        with open(rss_file) as f:
            rss = int(f.read().split()[-1])
        os.unlink(rss_file)
    return t, rss


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 22)
            if not b:
                return h.hexdigest()
            h.update(b)


def warm(*paths):
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def generate(a, shape, host, guest, target):
    gen = os.path.join(a.build, "tests/vperfetto_tracegen")
    if os.path.exists(guest) and os.path.getsize(guest) >= target:
        return
    print(f"generating the {shape} guest trace (>= {target / 1e6:.0f} MB) ...",
          flush=True)
    if shape == "small":
        subprocess.run([gen, "--host", host, "--guest", guest, "--seed", "7",
                        "--duration-s", "600", "--exchanges", "1000",
                        "--target-bytes", str(target)],
                       check=True, stdout=subprocess.DEVNULL)
    else:
        here = os.path.dirname(os.path.abspath(__file__))
        subprocess.run([sys.executable, os.path.join(here, "ftrace_heavy.py"),
                        gen, host, guest, str(target)], check=True)


def bench_shape(a, shape, threads):
    merge = os.path.join(a.build, "merge/vperfetto_merge")
    d = os.path.join(a.work, shape)
    os.makedirs(d, exist_ok=True)
    host, guest = os.path.join(d, "host.pb"), os.path.join(d, "guest.pb")
    copy, merged = os.path.join(d, "copy.pb"), os.path.join(d, "merged.pb")
    generate(a, shape, host, guest, int(a.size_mb * 1e6))
    mb = (os.path.getsize(host) + os.path.getsize(guest)) / 1e6
    warm(host, guest)

    cats, syncs, merges, rss, shas = [], [], {n: [] for n in threads}, {}, {}
    for _ in range(a.runs):
        with open(copy, "wb") as out:
            cats.append(timed(["cat", host, guest], stdout=out)[0])
        # the same, made durable as the merge's output is (it fsyncs)
        with open(copy, "wb") as out:
            t = timed(["cat", host, guest], stdout=out)[0]
        syncs.append(t + timed(["sync", copy])[0])
        for n in threads:
            # Into no file, as cat writes into one truncated before its
            # clock starts: replacing a merged output of the last run
            # would time the kernel freeing its pages.
            if os.path.exists(merged):
                os.unlink(merged)
            t, r = timed([merge, "-q", "--threads", str(n), host, guest,
                          "-o", merged])
            merges[n].append(t)
            rss[n] = max(rss.get(n, 0), r)
            if a.sha256 and n not in shas:
                shas[n] = sha256(merged)
    os.unlink(copy)
    if not a.keep:
        os.unlink(merged)

    c, cs = statistics.median(cats), statistics.median(syncs)
    goal = TARGET_RATIO[shape]
    print(f"\n{shape}: host {os.path.getsize(host) / 1e6:.1f} MB + guest "
          f"{os.path.getsize(guest) / 1e6:.1f} MB = {mb:.1f} MB, "
          f"median of {a.runs}")
    print(f"  {'':22} {'time':>8} {'MB/s':>7} {'x cat':>7} {'peak RSS':>10}")
    print(f"  {'cat host guest > copy':22} {c:7.2f}s {mb / c:7.0f} {1:7.2f}")
    print(f"  {'cat + sync copy':22} {cs:7.2f}s {mb / cs:7.0f} {cs / c:7.2f}")
    t1 = None
    for n in threads:
        m = statistics.median(merges[n])
        t1 = m if t1 is None else t1
        notes = []
        notes.append("meets" if m / c <= goal else "misses")
        notes[-1] += f" <= {goal:g}x cat"
        notes.append(("meets" if rss[n] <= 64 * 1024 else "misses") +
                     " <= 64 MiB")
        if n != threads[0]:
            notes.append("not slower than 1 thread" if m <= t1 * 1.05
                         else "SLOWER than 1 thread")
        print(f"  {'merge --threads ' + str(n):22} {m:7.2f}s {mb / m:7.0f} "
              f"{m / c:7.2f} {rss[n] / 1024:7.1f} MiB  {'; '.join(notes)}; "
              f"{m / cs:.2f}x cat+sync")
    if a.sha256:
        for n in threads:
            print(f"  sha256 --threads {n}: {shas[n]}")
        if len(set(shas.values())) > 1:
            print("  OUTPUTS DIFFER between thread counts")
            return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--work", default=os.path.join(root, "build", "bench"))
    ap.add_argument("--shapes", default="small,ftrace")
    ap.add_argument("--size-mb", type=float, default=500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", default=None,
                    help="comma-separated (default: 1 and the number of CPUs)")
    ap.add_argument("--sha256", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep merged.pb")
    a = ap.parse_args()
    ncpu = os.cpu_count() or 1
    threads = ([int(x) for x in a.threads.split(",")] if a.threads
               else sorted({1, ncpu}))
    rc = 0
    for shape in a.shapes.split(","):
        rc |= bench_shape(a, shape, threads)
    return rc


if __name__ == "__main__":
    sys.exit(main())
