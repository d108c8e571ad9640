#!/usr/bin/env python3
"""merge_bench.py - how fast vperfetto_merge is, against cat, in one run.

Generates a guest trace of at least --size-gib GiB (default 1) and a host
trace with the project's generator, warms the page cache, then times:
  - cat host.pb guest.pb > copy.pb       (same bytes read and written)
  - cat ... && sync copy.pb              (the same, made durable like the merge's output)
  - vperfetto_merge host.pb guest.pb -o merged.pb
each --runs times (median reported), and the merge's peak RSS.  Targets
(issue 2): merge within 2x of cat on a warm cache; peak RSS under 64 MiB.

usage: merge_bench.py [--build DIR] [--work DIR] [--size-gib N] [--runs N]
"""
import argparse, os, resource, statistics, subprocess, sys, time

def run(cmd, **kw):
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, **kw)
    return time.monotonic() - t0

def child_peak_rss_kib(cmd):
    """Runs cmd in a fresh python child so RUSAGE_CHILDREN is only cmd's."""
    code = ("import resource,subprocess,sys;"
            "subprocess.run(sys.argv[1:],check=True,stdout=subprocess.DEVNULL,"
            "stderr=subprocess.DEVNULL);"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code] + cmd, check=True,
                         capture_output=True, text=True)
    return int(out.stdout.strip())

def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--work", default=os.path.join(root, "build", "bench"))
    ap.add_argument("--size-gib", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()

    os.makedirs(a.work, exist_ok=True)
    gen = os.path.join(a.build, "tests/vperfetto_tracegen")
    merge = os.path.join(a.build, "merge/vperfetto_merge")
    host, guest = os.path.join(a.work, "host.pb"), os.path.join(a.work, "guest.pb")
    copy, merged = os.path.join(a.work, "copy.pb"), os.path.join(a.work, "merged.pb")
    target = int(a.size_gib * (1 << 30))

    if not os.path.exists(guest) or os.path.getsize(guest) < target:
        print(f"generating a guest trace of >= {a.size_gib} GiB ...", flush=True)
        t = run([gen, "--host", host, "--guest", guest, "--seed", "7",
                 "--duration-s", "600", "--exchanges", "1000",
                 "--target-bytes", str(target)], stdout=subprocess.DEVNULL)
        print(f"  generated in {t:.1f} s")
    size = os.path.getsize(host) + os.path.getsize(guest)
    mb = size / 1e6
    print(f"input: host {os.path.getsize(host)/1e6:.1f} MB + guest "
          f"{os.path.getsize(guest)/1e6:.1f} MB = {mb:.1f} MB")

    # warm the cache
    for f in (host, guest):
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass

    def cat():
        with open(copy, "wb") as out:
            return run(["cat", host, guest], stdout=out)

    def cat_sync():
        t = cat()
        return t + run(["sync", copy])

    def do_merge(threads):
        return run([merge, "-q", "--threads", str(threads), host, guest,
                    "-o", merged])

    cats, cat_syncs, merges, merges1 = [], [], [], []
    for _ in range(a.runs):   # interleaved, so machine noise hits all alike
        cats.append(cat())
        cat_syncs.append(cat_sync())
        merges.append(do_merge(2))
        merges1.append(do_merge(1))
    rss = child_peak_rss_kib([merge, "-q", host, guest, "-o", merged])
    os.unlink(copy)

    c, cs, m, m1 = (statistics.median(x)
                    for x in (cats, cat_syncs, merges, merges1))
    print(f"cat host+guest > copy:      {c:7.2f} s  {mb / c:8.0f} MB/s  (median of {a.runs})")
    print(f"cat + sync:                 {cs:7.2f} s  {mb / cs:8.0f} MB/s")
    print(f"vperfetto_merge:            {m:7.2f} s  {mb / m:8.0f} MB/s  (2 threads, incl. fsync)")
    print(f"vperfetto_merge --threads 1:{m1:7.2f} s  {mb / m1:8.0f} MB/s")
    print(f"merge / cat time ratio:     {m / c:7.2f}x   (target <= 2x)")
    print(f"merge / (cat+sync) ratio:   {m / cs:7.2f}x")
    print(f"merge peak RSS:             {rss / 1024:7.1f} MiB (target < 64 MiB; input {mb:.0f} MB)")
    return 0

if __name__ == "__main__":
    sys.exit(main())
