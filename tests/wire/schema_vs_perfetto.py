#!/usr/bin/env python3
"""schema_vs_perfetto.py - protos/ against Perfetto's own protos.

protos/ is the one source of every field number in vperfetto (the
generated perfetto_fields.h, the protobuf-c code).  It declares a subset
of Perfetto's schema, and that subset must be Perfetto's: every message,
field and enum value we declare must exist in Perfetto's protos with the
same number, name, type and label.  A field Perfetto has since reserved
is reported too.

  schema_vs_perfetto.py GEN_FIELDS_PY OUR_SCHEMA.pb [PERFETTO_SRC]

PERFETTO_SRC (or the environment variable of that name, or
PERFETTO_MIRROR, which ../shared/perfetto/build.sh reads too) is a
checkout of Perfetto's repository or a bare clone of it (then HEAD's
protos/ are read).  Without one the test is skipped (exit 77) and says so.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

SKIP = 77
# Perfetto's label numbers (FieldDescriptorProto.Label) and type numbers.
LABELS = {1: 'optional', 2: 'required', 3: 'repeated'}
ROOTS = ['protos/perfetto/trace/trace.proto',
         'protos/perfetto/ipc/consumer_port.proto',
         'protos/perfetto/ipc/producer_port.proto',
         'protos/perfetto/ipc/wire_protocol.proto']


def load_reader(path):
    spec = importlib.util.spec_from_file_location('gen_fields', path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def perfetto_protos(src, work):
    """A directory holding Perfetto's protos/ tree."""
    if os.path.isdir(os.path.join(src, 'protos', 'perfetto')):
        return src
    # A bare clone: take protos/ out of HEAD.
    out = os.path.join(work, 'src')
    os.makedirs(out)
    r = subprocess.run(['git', '--git-dir', src, 'archive', 'HEAD',
                        'protos/perfetto'],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        sys.exit('cannot read protos/ from %s: %s' % (src, r.stderr))
    arch = r.stdout
    subprocess.run(['tar', '-x', '-C', out], input=arch, check=True)
    return out


def compile_schema(root, work):
    out = os.path.join(work, 'perfetto_schema.pb')
    r = subprocess.run(['protoc-c', '-I', root, '--include_imports',
                        '--descriptor_set_out=' + out] + ROOTS,
                       cwd=root, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit('cannot compile Perfetto\'s protos in %s:\n%s'
                 % (root, r.stderr))
    return out


def strip_pkg(type_name):
    """.perfetto.protos.Foo.Bar -> Foo.Bar (None stays None)."""
    if type_name and type_name.startswith('.perfetto.protos.'):
        return type_name[len('.perfetto.protos.'):]
    return type_name


def compare(ours, theirs):
    msgs, enums = ours
    pmsgs, penums = theirs
    errors = []
    nfields = 0
    for mname, flds in sorted(msgs.items()):
        if mname not in pmsgs:
            errors.append('message %s: not in Perfetto\'s protos' % mname)
            continue
        pf = pmsgs[mname]
        by_number = {f['number']: n for n, f in pf.items()}
        for fname, f in sorted(flds.items()):
            nfields += 1
            where = '%s.%s = %d' % (mname, fname, f['number'])
            if fname not in pf:
                other = by_number.get(f['number'])
                errors.append('%s: Perfetto has no field of that name%s'
                              % (where, ' (its %d is %s)'
                                 % (f['number'], other) if other else ''))
                continue
            p = pf[fname]
            if p['number'] != f['number']:
                errors.append('%s: Perfetto numbers it %d'
                              % (where, p['number']))
            if p['type'] != f['type'] or \
               strip_pkg(p['type_name']) != strip_pkg(f['type_name']):
                errors.append('%s: type %s%s, Perfetto\'s %s%s'
                              % (where, f['type'],
                                 ' ' + str(f['type_name'] or ''),
                                 p['type'], ' ' + str(p['type_name'] or '')))
            if p['label'] != f['label']:
                errors.append('%s: %s, Perfetto\'s is %s'
                              % (where, LABELS.get(f['label']),
                                 LABELS.get(p['label'])))
    nvalues = 0
    for ename, values in sorted(enums.items()):
        if ename not in penums:
            errors.append('enum %s: not in Perfetto\'s protos' % ename)
            continue
        for vname, num in sorted(values.items()):
            nvalues += 1
            pnum = penums[ename].get(vname)
            if pnum != num:
                errors.append('%s.%s = %d: Perfetto\'s is %s'
                              % (ename, vname, num, pnum))
    return errors, len(msgs), nfields, len(enums), nvalues


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    src = sys.argv[3] if len(sys.argv) == 4 else (
        os.environ.get('PERFETTO_SRC') or os.environ.get('PERFETTO_MIRROR')
        or '')
    if not src or not os.path.exists(src):
        print('SKIP: no Perfetto source to compare with: set PERFETTO_SRC '
              'to a checkout or a bare clone of Perfetto\'s repository')
        sys.exit(SKIP)
    gen = load_reader(sys.argv[1])
    ours = gen.read_schema(sys.argv[2])
    with tempfile.TemporaryDirectory() as work:
        theirs = gen.read_schema(
            compile_schema(perfetto_protos(src, work), work))
    errors, nm, nf, ne, nv = compare(ours, theirs)
    for e in errors:
        print('MISMATCH', e)
    print('protos/ against %s: %d messages, %d fields, %d enums, %d values; '
          '%d mismatches' % (src, nm, nf, ne, nv, len(errors)))
    sys.exit(1 if errors else 0)


if __name__ == '__main__':
    main()
