#!/usr/bin/env python3
"""tp_vs_perfetto.py - vperfetto_tp and Perfetto's trace processor loading
the same traces, side by side in one run.

Two shapes, as users record them:
  track_event  N nested track-event slices on 8 threads (vperfetto_tp_gen)
  ftrace       a guest trace of compact_sched bundles (ftrace_heavy.py)
Each trace is loaded with one query (a count of its main table) by
vperfetto_tp and by trace_processor_shell, interleaved, --runs times; the
median wall time, MB/s and the peak RSS of both are printed on one row
with the ratio and whether the goal is met: faster than Perfetto on
every shape and at most its memory.

The oracle is PERFETTO_TP, else ~/.cache/perfetto-real/bin/
trace_processor_shell (../shared/perfetto/build.sh); without it only
vperfetto_tp's figures are printed, and the script says so.

usage: tp_vs_perfetto.py [--build DIR] [--events N] [--ftrace-mb N]
                         [--runs N] [--keep]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TIME = "/usr/bin/time"
HERE = os.path.dirname(os.path.abspath(__file__))


def timed(cmd):
    """(seconds, peak RSS KiB) of cmd, its output discarded."""
    rss_file = None
    if os.access(TIME, os.X_OK):
        fd, rss_file = tempfile.mkstemp(prefix="tp_vs_perfetto.")
        os.close(fd)
        cmd = [TIME, "-q", "-f", "%M", "-o", rss_file] + cmd
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    t = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status):
        sys.exit(f"{cmd} failed: {err[-400:]}")
    rss = ru.ru_maxrss
    if rss_file:
        with open(rss_file) as f:
            rss = int(f.read().split()[-1])
        os.unlink(rss_file)
    return t, rss


def find_oracle():
    for c in (os.environ.get("PERFETTO_TP"),
              os.path.expanduser(
                  "~/.cache/perfetto-real/bin/trace_processor_shell")):
        if c and os.access(c, os.X_OK):
            return c
    return None


def make_traces(build, work, events, ftrace_mb):
    te = os.path.join(work, "track_event.pb")
    subprocess.run([os.path.join(build, "tests", "vperfetto_tp_gen"),
                    "-n", str(events), "--threads", "8", "-o", te],
                   check=True, stdout=subprocess.DEVNULL)
    ft_host = os.path.join(work, "ft_host.pb")
    ft = os.path.join(work, "ftrace.pb")
    subprocess.run([sys.executable, os.path.join(HERE, "ftrace_heavy.py"),
                    os.path.join(build, "tests", "vperfetto_tracegen"),
                    ft_host, ft, str(ftrace_mb << 20)],
                   check=True, stdout=subprocess.DEVNULL)
    return [("track_event", te, "select count(*) from slice"),
            ("ftrace", ft, "select count(*) from sched")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--ftrace-mb", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    ours = os.path.join(a.build, "processor", "vperfetto_tp")
    oracle = find_oracle()
    if not oracle:
        print("Perfetto's trace_processor_shell is not built (see "
              "../shared/perfetto/build.sh or set PERFETTO_TP): "
              "vperfetto_tp's figures only")
    work = tempfile.mkdtemp(prefix="tp_vs_perfetto.")
    try:
        traces = make_traces(a.build, work, a.events, a.ftrace_mb)
        print(f"{'shape':12} {'MB':>6} | {'vperfetto_tp':>22} | "
              f"{'trace_processor_shell':>22} | time ratio  RSS ratio  goal")
        missed = False
        for shape, path, sql in traces:
            mb = os.path.getsize(path) / 1e6
            ot, orss, pt, prss = [], [], [], []
            for _ in range(a.runs):
                t, r = timed([ours, "--quiet", path, "-Q", sql])
                ot.append(t)
                orss.append(r)
                if oracle:
                    t, r = timed([oracle, "-Q", sql, path])
                    pt.append(t)
                    prss.append(r)
            o_t, o_r = statistics.median(ot), max(orss)
            row = (f"{shape:12} {mb:6.0f} | {o_t:6.2f} s {mb / o_t:6.1f} MB/s "
                   f"{o_r / 1024:5.0f} MiB |")
            if oracle:
                p_t, p_r = statistics.median(pt), max(prss)
                ok = o_t < p_t and o_r <= p_r
                missed |= not ok
                row += (f" {p_t:6.2f} s {mb / p_t:6.1f} MB/s "
                        f"{p_r / 1024:5.0f} MiB | {o_t / p_t:10.2f} "
                        f"{o_r / p_r:10.2f}  "
                        f"{'met' if ok else 'MISSED'}")
            else:
                row += " (not built)"
            print(row)
        return 1 if missed else 0
    finally:
        if a.keep:
            print(f"traces kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
