#!/usr/bin/env python3
# oracle_diff.py - vperfetto_tp against Perfetto's own trace processor.
#
#   oracle_diff.py BUILD_DIR [--update] [--only SUBSTR] [-v]
#   oracle_diff.py BUILD_DIR --trace NAME=PATH ...
#
# With --trace, only the traces given are compared (a recording of the VM
# test, say), and only against the live oracle: without it the run says
# so and exits 77 (skipped).
#
# A corpus of traces (traces our generators write with fixed seeds, the
# merge's outputs of them, the processor's own cases and, when
# ../shared/conformance is beside the checkout, every conformance trace)
# is run through a query per table (queries/*.sql) by both processors,
# and the rows must be equal.
#
# The oracle is trace_processor_shell from PERFETTO_TP, else
# PERFETTO_BIN/trace_processor_shell, else
# ~/.cache/perfetto-real/bin/trace_processor_shell (../shared/perfetto/
# build.sh builds it), run with the flags Perfetto's diff tests use
# (ORACLE_FLAGS).  Where it is missing, the rows it gave before are
# used: expected/<trace>.txt holds them, with the SHA-256 of the trace they
# belong to, so a trace that changed since is reported as stale and
# skipped, never compared with rows of another trace.  --update rewrites
# those files from the live oracle.
#
# Merged traces are also checked for what a user sees first in Perfetto:
# the host and each guest are machines, the guest's threads are on a
# guest machine, and the stats show no error our output caused.
#
# Differences known and explained are listed in known_diffs.txt; they are
# printed, and do not fail the run.  Exit 0 when every other comparison
# is equal, 1 on a difference, 2 on bad usage.
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
QUERIES = os.path.join(HERE, 'queries')
EXPECTED = os.path.join(HERE, 'expected')
SRC_ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..'))

# Stats a merged trace may carry that are not of our making: holes of the
# recording kernel or of the generated data itself.
MERGED_STATS_ALLOWED = {
    'mismatched_sched_switch_tids',
    'ftrace_cpu_overrun_end',
    'ftrace_cpu_overrun_begin',
}


def find_oracle():
    cands = []
    if os.environ.get('PERFETTO_TP'):
        cands.append(os.environ['PERFETTO_TP'])
    if os.environ.get('PERFETTO_BIN'):
        cands.append(os.path.join(os.environ['PERFETTO_BIN'],
                                  'trace_processor_shell'))
    cands.append(os.path.expanduser(
        '~/.cache/perfetto-real/bin/trace_processor_shell'))
    for c in cands:
        if os.access(c, os.X_OK):
            return c
    return None


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, **kw)


def must(cmd):
    r = run(cmd)
    if r.returncode != 0:
        sys.exit('oracle_diff: %s failed (%d): %s' %
                 (' '.join(cmd), r.returncode,
                  r.stderr.decode(errors='replace')[:400]))


def build_corpus(build, tmp):
    """Returns [(name, path)]: the traces to compare, in a fixed order."""
    gen = os.path.join(build, 'tests', 'vperfetto_tracegen')
    tpgen = os.path.join(build, 'tests', 'vperfetto_tp_gen')
    merge = os.path.join(build, 'merge', 'vperfetto_merge')
    out = []

    def p(name):
        return os.path.join(tmp, name + '.pb')

    # A host and a guest with clock sync, ftrace and track events; the
    # same with a TSC offset change half way (a migration).
    for name, extra in (('tg', []),
                        ('tgstep', ['--tsc-step', '5000000000'])):
        must([gen, '--host', p(name + '_host'), '--guest', p(name + '_guest'),
              '--seed', '5', '--duration-s', '2', '--events', '400',
              '--threads', '3', '--cpus', '2', '--exchanges', '10',
              '--kvm-tsc', '-q'] + extra)
        out += [(name + '_host', p(name + '_host')),
                (name + '_guest', p(name + '_guest'))]
        must([merge, p(name + '_host'), p(name + '_guest'),
              '-o', p('merged_' + name), '-q'])
        out.append(('merged_' + name, p('merged_' + name)))
        must([merge, '--no-machine-id', p(name + '_host'),
              p(name + '_guest'), '-o', p('merged_nomid_' + name), '-q'])
        out.append(('merged_nomid_' + name, p('merged_nomid_' + name)))
    # The merge's other modes, on the first pair: the host mapped onto the
    # guest's axis, an offset given by hand, and the two joined unchanged
    # (one machine's worth of packets each, so not a "merged_" trace).
    for name, opts in (('merged_onto_tg', ['--onto', 'guest']),
                       ('merged_offset_tg',
                        ['--guest-offset-ns', '1500000000']),
                       ('concat_tg', ['--concat'])):
        must([merge, p('tg_host'), p('tg_guest'), '-o', p(name), '-q']
             + opts)
        out.append((name, p(name)))
    # --vm-tracks on a pair with the vCPU scenario appended (as
    # tests/merge/vm_tracks_e2e.sh builds it).
    vgen = os.path.join(build, 'tests', 'vperfetto_vcpu_gen')
    params = os.path.join(tmp, 'vt_params.txt')
    must([gen, '--host', p('vt_h'), '--guest', p('vt_g'), '--seed', '5',
          '--duration-s', '1', '--events', '200', '--params-out', params,
          '-q'])
    with open(params) as f:
        kv = dict(ln.strip().split('=', 1) for ln in f if '=' in ln)
    must([vgen, str(int(kv['hb0']) + 100000000),
          str(int(kv['gb0']) + 100000000), '1000', p('vt_hx'), p('vt_gx')])
    for side in ('h', 'g'):
        with open(p('vt_' + side + 'all'), 'wb') as o:
            for part in (p('vt_' + side), p('vt_' + side + 'x')):
                with open(part, 'rb') as i:
                    shutil.copyfileobj(i, o)
    must([merge, p('vt_hall'), p('vt_gall'), '--vm-tracks', '-o',
          p('merged_vmtracks'), '-q'])
    out.append(('merged_vmtracks', p('merged_vmtracks')))
    must([tpgen, '-n', '600', '--threads', '3', '--seed', '2',
          '-o', p('tpgen')])
    out.append(('tpgen', p('tpgen')))

    # Traces written by hand, as Perfetto's rows were worked out for.
    cases = os.path.join(SRC_ROOT, 'tests', 'processor', 'cases')
    for d in sorted(os.listdir(cases)):
        t = os.path.join(cases, d, 'trace.pb')
        if os.path.isfile(t):
            out.append(('case_' + d, t))
    conf = os.environ.get('CONFORMANCE_DIR',
                          os.path.join(SRC_ROOT, '..', 'shared',
                                       'conformance', 'cases'))
    if os.path.isdir(conf):
        for d in sorted(os.listdir(conf)):
            t = os.path.join(conf, d, 'trace.pb')
            if os.path.isfile(t):
                out.append(('conf_' + d, t))
    else:
        print('note: no conformance traces at %s; compared without them'
              % conf)
    return out


# vperfetto_tp gives the rows Perfetto's own diff tests expect, and those
# run trace_processor_shell with these flags (the proto content analysis
# adds an args set per track event name; track events outside the trace's
# bounds are cropped).
ORACLE_FLAGS = ['--analyze-trace-proto-content', '--crop-track-events']


def query(binary, trace, qfile, ours):
    args = [binary, '--quiet', trace, '-q', qfile] if ours else \
        [binary] + ORACLE_FLAGS + ['-q', qfile, trace]
    try:
        r = run(args, timeout=300)
    except subprocess.TimeoutExpired:
        return 'ERROR timeout\n'
    if r.returncode != 0:
        return 'ERROR\n'
    return normalise(r.stdout.decode(errors='replace'))


def query_ours_all(binary, trace, qnames):
    """Every query of qnames through one vperfetto_tp process (one load of
    the trace, where a process per query made this test minutes long under
    the sanitizers): each query's rows follow a marker row naming it.  When
    the run fails (a query that errors stops it), each query is run alone,
    so each gets its own result or ERROR."""
    args = [binary, '--quiet', trace]
    for q in qnames:
        args += ['-Q', "SELECT 'oracle-query:%s' AS marker" % q,
                 '-q', os.path.join(QUERIES, q + '.sql')]
    try:
        r = run(args, timeout=300)
    except subprocess.TimeoutExpired:
        r = None
    out = {}
    if r is not None and r.returncode == 0:
        lines = r.stdout.decode(errors='replace').split('\n')
        name = None
        i = 0
        while i < len(lines):
            if lines[i] == '"marker"' and i + 1 < len(lines) and \
                    lines[i + 1].startswith('"oracle-query:'):
                name = lines[i + 1][len('"oracle-query:'):-1]
                out[name] = []
                i += 2
                continue
            if name is not None:
                out[name].append(lines[i])
            i += 1
    if sorted(out) != sorted(qnames):
        return {q: query(binary, trace, os.path.join(QUERIES, q + '.sql'),
                         True) for q in qnames}
    return {q: normalise('\n'.join(v)) for q, v in out.items()}


def normalise(s):
    lines = [ln.strip() for ln in s.replace('\r', '').split('\n')]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return '\n'.join(lines) + '\n'


def sha256(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for b in iter(lambda: f.read(1 << 20), b''):
            h.update(b)
    return h.hexdigest()


def load_expected(name):
    """{'sha256': hex, query: rows} from expected/NAME.txt, or None."""
    path = os.path.join(EXPECTED, name + '.txt')
    if not os.path.exists(path):
        return None
    res, cur = {}, None
    with open(path) as f:
        for ln in f:
            if ln.startswith('## sha256 '):
                res['sha256'] = ln.split()[2]
            elif ln.startswith('== ') and ln.rstrip().endswith(' =='):
                cur = ln.strip()[3:-3]
                res[cur] = ''
            elif cur is not None:
                res[cur] += ln
    return res


def save_expected(name, digest, rows):
    os.makedirs(EXPECTED, exist_ok=True)
    tmp = os.path.join(EXPECTED, '.' + name + '.tmp')
    with open(tmp, 'w') as f:
        f.write('## rows Perfetto v58.2 trace_processor_shell %s gives\n'
                % ' '.join(ORACLE_FLAGS))
        f.write('## sha256 %s\n' % digest)
        for q in sorted(rows):
            f.write('== %s ==\n%s' % (q, rows[q]))
    os.replace(tmp, os.path.join(EXPECTED, name + '.txt'))


def load_known():
    known = {}
    path = os.path.join(HERE, 'known_diffs.txt')
    if os.path.exists(path):
        with open(path) as f:
            for ln in f:
                ln = ln.strip()
                if not ln or ln.startswith('#'):
                    continue
                trace, q, why = ln.split(None, 2)
                known[(trace, q)] = why
    return known


def matches(pattern, name):
    """A known_diffs pattern: exact, or a prefix ending in '*'."""
    if pattern.endswith('*'):
        return name.startswith(pattern[:-1])
    return pattern == name


def known_reason(known, trace, q):
    for (tp, qp), why in known.items():
        if matches(tp, trace) and matches(qp, q):
            return why
    return None


def merged_checks(rows):
    """What a user must see in Perfetto on a merged trace; [] when right."""
    errs = []
    machines = rows.get('machine', '').strip().split('\n')[1:]
    if len(machines) < 2:
        errs.append('expected a host and a guest machine, got %d' %
                    len(machines))
    threads = rows.get('thread', '').strip().split('\n')
    if threads and threads[0]:
        cols = [c.strip('"') for c in threads[0].split(',')]
        mi = cols.index('machine_id') if 'machine_id' in cols else None
        if mi is not None:
            on_guest = [t for t in threads[1:]
                        if t.split(',')[mi] not in ('0', '"[NULL]"', '')]
            if not on_guest:
                errs.append('no thread on a guest machine')
    for ln in rows.get('stats', '').strip().split('\n')[1:]:
        f = [c.strip('"') for c in ln.split(',')]
        if len(f) >= 5 and f[2] in ('error', 'data_loss') and \
                f[0] not in MERGED_STATS_ALLOWED:
            errs.append('stats: %s[%s] = %s (%s)' % (f[0], f[1], f[4], f[2]))
    return errs


def main():
    argv = sys.argv[1:]
    if not argv or argv[0].startswith('-'):
        print('usage: oracle_diff.py BUILD_DIR [--update] [--only S] [-v]',
              file=sys.stderr)
        return 2
    build = os.path.abspath(argv[0])
    update = '--update' in argv
    verbose = '-v' in argv
    only = argv[argv.index('--only') + 1] if '--only' in argv else None
    given = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == '--trace']
    ours = os.path.join(build, 'processor', 'vperfetto_tp')
    oracle = find_oracle()
    if oracle:
        print('oracle: %s (live)' % oracle)
    else:
        print('oracle: trace_processor_shell not found (set PERFETTO_TP or '
              'build it with ../shared/perfetto/build.sh); comparing with '
              'the rows it gave before, stored in %s' % EXPECTED)
        if update:
            print('--update needs the live oracle', file=sys.stderr)
            return 2
        if given:
            print('SKIP: --trace needs the live oracle')
            return 77
    qnames = sorted(f[:-4] for f in os.listdir(QUERIES) if f.endswith('.sql'))
    known = load_known()
    tmp = tempfile.mkdtemp(prefix='oracle_diff.')
    try:
        if given:
            corpus = [tuple(g.split('=', 1)) for g in given]
        else:
            corpus = build_corpus(build, tmp)
        n_eq = n_diff = n_known = n_skip = 0
        for name, trace in corpus:
            if only and only not in name:
                continue
            digest = sha256(trace)
            if oracle:
                want = {q: query(oracle, trace,
                                 os.path.join(QUERIES, q + '.sql'), False)
                        for q in qnames}
                if update and not given:
                    save_expected(name, digest, want)
            else:
                want = load_expected(name)
                if want is None:
                    n_skip += 1
                    print('SKIP %s: no stored rows' % name)
                    continue
                if want.get('sha256') != digest:
                    n_skip += 1
                    print('SKIP %s: stale stored rows (the trace changed; '
                          're-run with the oracle and --update)' % name)
                    continue
            asked = [q for q in qnames if q in want]
            got = query_ours_all(ours, trace, asked)
            for q in asked:
                w = want[q]
                if w.startswith('ERROR') and got[q].startswith('ERROR'):
                    continue
                if w == got[q]:
                    n_eq += 1
                    continue
                why = known_reason(known, name, q)
                if why:
                    n_known += 1
                    print('KNOWN %s %s: %s' % (name, q, why))
                    continue
                n_diff += 1
                print('DIFF %s %s' % (name, q))
                if verbose or n_diff <= 20:
                    show_diff(w, got[q])
            # --no-machine-id gives one machine on purpose.
            if (name.startswith('merged_') or name.startswith('vm_')) \
                    and 'nomid' not in name:
                for e in merged_checks(want):
                    n_diff += 1
                    print('DIFF %s in Perfetto: %s' % (name, e))
        print('oracle_diff: %d equal, %d differ, %d known, %d skipped '
              '(%d traces x %d queries)' % (n_eq, n_diff, n_known, n_skip,
                                            len(corpus), len(qnames)))
        return 1 if n_diff else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def show_diff(want, got):
    import difflib
    d = list(difflib.unified_diff(want.split('\n'), got.split('\n'),
                                  'perfetto', 'vperfetto_tp', lineterm='',
                                  n=1))
    for ln in d[:16]:
        print('    ' + ln[:200])
    if len(d) > 16:
        print('    ... %d more diff lines' % (len(d) - 16))


if __name__ == '__main__':
    sys.exit(main())
