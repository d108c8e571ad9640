#!/usr/bin/env python3
"""gen_fields.py - writes perfetto_fields.h from the schema in protos/.

The merge, the processor and the probes walk packets with the zero-copy
scanner in pb_wire.h rather than generated code, so they name fields and
enum values by constants.  Those constants used to be typed by hand and
could drift from protos/.  Now a list of names (perfetto_fields.def: a
constant's name and the schema path it stands for, no numbers) is resolved
against the compiled schema, a FileDescriptorSet that protoc writes at
build time, and every number in the header comes from protos/.  A path
that does not resolve fails the build.

  gen_fields.py DESCRIPTOR_SET DEF_FILE OUT_HEADER

.def syntax, one entry a line:
  # comment                      dropped
  /* comment */                  copied into the header (opens a group)
  NAME  Message.field            the field's number
  NAME  Message.Nested.field     a nested message's field
  NAME  Enum.VALUE               an enum value (Enum may be nested)
  NAME  = N                      a convention that is not in the schema
                                 (clock ids 64..127); say why beside it
  @names Enum FUNCTION           a function that names the enum's values
  @enum NAME                     the group that follows is enum NAME (a
                                 type the code can declare variables of)
  @values Enum                   every value of Enum, named as in protos/
  @xmacro Enum PREFIX NAME       NAME(X): X(value, "name") for every value
                                 but 0, the name in lower case without
                                 PREFIX; NAME_MAX: the highest value
"""
import sys

PACKAGE = 'perfetto.protos'


# ---- a minimal protobuf wire reader (descriptor.proto needs no more)

def varint(buf, pos):
    shift = 0
    val = 0
    while True:
        b = buf[pos]
        pos += 1
        val |= (b & 0x7F) << shift
        if b < 0x80:
            return val, pos
        shift += 7


def fields(buf):
    """Yields (field number, value) for one message; value is an int for
    varints and bytes for length-delimited fields."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = varint(buf, pos)
        elif wt == 2:
            ln, pos = varint(buf, pos)
            val = buf[pos:pos + ln]
            pos += ln
        elif wt == 1:
            val = buf[pos:pos + 8]
            pos += 8
        elif wt == 5:
            val = buf[pos:pos + 4]
            pos += 4
        else:
            raise ValueError('wire type %d in the descriptor set' % wt)
        yield num, val


# ---- the schema

def read_enum(buf, prefix, enums):
    name = None
    values = {}
    for num, val in fields(buf):
        if num == 1:
            name = val.decode()
        elif num == 2:   # EnumValueDescriptorProto
            vname = vnum = None
            for n2, v2 in fields(val):
                if n2 == 1:
                    vname = v2.decode()
                elif n2 == 2:
                    vnum = v2 - (1 << 64) if v2 >= 1 << 63 else v2
            values[vname] = vnum
    enums[prefix + name] = values


def read_message(buf, prefix, messages, enums):
    name = None
    subs = []
    flds = {}
    for num, val in fields(buf):
        if num == 1:
            name = val.decode()
        elif num == 2:   # FieldDescriptorProto
            f = {'number': None, 'label': None, 'type': None,
                 'type_name': None}
            fname = None
            for n2, v2 in fields(val):
                if n2 == 1:
                    fname = v2.decode()
                elif n2 == 3:
                    f['number'] = v2
                elif n2 == 4:
                    f['label'] = v2
                elif n2 == 5:
                    f['type'] = v2
                elif n2 == 6:
                    f['type_name'] = v2.decode()
            flds[fname] = f
        elif num in (3, 4):
            subs.append((num, val))
    full = prefix + name
    messages[full] = flds
    for num, val in subs:
        if num == 3:
            read_message(val, full + '.', messages, enums)
        else:
            read_enum(val, full + '.', enums)


def read_schema(path):
    """The messages and enums of package perfetto.protos in a
    FileDescriptorSet: ({'TracePacket': {'timestamp': {number, label,
    type, type_name}}, ...}, {'BuiltinClock': {'BUILTIN_CLOCK_TSC': 9}}),
    names relative to the package."""
    messages, enums = {}, {}
    with open(path, 'rb') as f:
        data = f.read()
    for num, fdp in fields(data):
        if num != 1:
            continue
        pkg = ''
        for n2, v2 in fields(fdp):
            if n2 == 2:
                pkg = v2.decode()
        if pkg != PACKAGE:
            continue
        for n2, v2 in fields(fdp):
            if n2 == 4:
                read_message(v2, '', messages, enums)
            elif n2 == 5:
                read_enum(v2, '', enums)
    return messages, enums


def resolve(path, messages, enums):
    """Message.field or Enum.VALUE -> number, or None."""
    owner, _, leaf = path.rpartition('.')
    if owner in messages and leaf in messages[owner]:
        return messages[owner][leaf]['number']
    if owner in enums and leaf in enums[owner]:
        return enums[owner][leaf]
    return None


def main():
    if len(sys.argv) != 4:
        sys.exit('usage: gen_fields.py DESCRIPTOR_SET DEF_FILE OUT_HEADER')
    messages, enums = read_schema(sys.argv[1])
    out = ['/*',
           ' * perfetto_fields.h - Perfetto field numbers and enum values for the',
           ' * code that walks packets with the zero-copy scanner (pb_wire.h).',
           ' *',
           ' * Generated by wire/gen_fields.py from the schema in protos/ and the',
           ' * names in wire/perfetto_fields.def: do not edit; add a line there.',
           ' */',
           '#ifndef VP_PERFETTO_FIELDS_H',
           '#define VP_PERFETTO_FIELDS_H',
           '']
    group = []
    errors = []
    tag = []

    def close_group():
        if group:
            out.append('enum %s{' % (tag[0] + ' ' if tag else ''))
            out.extend(group)
            out.append('};')
            out.append('')
            group.clear()
        tag.clear()

    with open(sys.argv[2]) as f:
        lines = f.read().split('\n')
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        lineno = i + 1
        i += 1
        if not line or line.startswith('#'):
            continue
        if line.startswith('/*'):
            close_group()
            out.append(line)
            while not line.endswith('*/') and i < len(lines):
                line = lines[i].rstrip()
                i += 1
                out.append(line)
            continue
        words = line.split(None, 2)
        where = '%s:%d' % (sys.argv[2], lineno)
        if words[0] == '@enum':
            close_group()
            if len(words) != 2:
                errors.append('%s: @enum needs a name' % where)
            else:
                tag.append(words[1])
            continue
        if words[0] == '@values':
            if len(words) != 2 or words[1] not in enums:
                errors.append('%s: @values needs a known enum' % where)
                continue
            close_group()
            out.append('enum {')
            for vname, vnum in sorted(enums[words[1]].items(),
                                      key=lambda v: v[1]):
                out.append('\t%s = %d, /* %s.%s */'
                           % (vname, vnum, words[1], vname))
            out.append('};')
            out.append('')
            continue
        if words[0] == '@xmacro':
            words = line.split()
            if len(words) != 4 or words[1] not in enums:
                errors.append('%s: @xmacro needs a known enum, a prefix '
                              'and a name' % where)
                continue
            close_group()
            vals = sorted((v, n) for n, v in enums[words[1]].items()
                          if v > 0)
            out.append('#define %s(X) \\' % words[3])
            for v, n in vals:
                short = n[len(words[2]):] if n.startswith(words[2]) else n
                out.append('\tX(%d, "%s")%s' % (v, short.lower(),
                                                ' \\' if (v, n) != vals[-1]
                                                else ''))
            out.append('#define %s_MAX %d' % (words[3], vals[-1][0]))
            out.append('')
            continue
        if words[0] == '@names':
            if len(words) != 3 or words[1] not in enums:
                errors.append('%s: @names needs a known enum and a '
                              'function name' % where)
                continue
            close_group()
            prefix = words[1].rsplit('.', 1)[-1]
            out.append('static inline const char *%s(unsigned id)'
                       % words[2])
            out.append('{')
            out.append('\tswitch (id) {')
            seen = set()
            for vname, vnum in enums[words[1]].items():
                # 0 is UNKNOWN and *_MAX_ID a bound, not a name to print.
                if vnum in seen or vnum <= 0 or vname.endswith('_MAX_ID'):
                    continue
                seen.add(vnum)
                short = vname
                # Perfetto's enum values carry the enum's name as a
                # prefix (BUILTIN_CLOCK_BOOTTIME): messages say BOOTTIME.
                for p in ('BUILTIN_CLOCK_', prefix.upper() + '_'):
                    if short.startswith(p):
                        short = short[len(p):]
                        break
                out.append('\tcase %d:' % vnum)
                out.append('\t\treturn "%s";' % short)
            out.append('\t}')
            out.append('\treturn "unknown";')
            out.append('}')
            out.append('')
            continue
        if len(words) < 2:
            errors.append('%s: a name and a schema path' % where)
            continue
        name, rest = words[0], line.split(None, 1)[1].strip()
        if rest.startswith('='):
            val, _, why = rest[1:].partition('/*')
            comment = (' /*' + why) if why else ''
            group.append('\t%s = %s,%s' % (name, val.strip(), comment))
            continue
        path, _, why = rest.partition('/*')
        path = path.strip()
        num = resolve(path, messages, enums)
        if num is None:
            errors.append('%s: %s: no %s in protos/' % (where, name, path))
            continue
        group.append('\t%s = %d, /* %s */' % (name, num, path))
    close_group()
    out.append('#endif')
    if errors:
        sys.exit('\n'.join(errors))
    tmp = sys.argv[3] + '.tmp'
    with open(tmp, 'w') as f:
        f.write('\n'.join(out) + '\n')
    import os
    os.replace(tmp, sys.argv[3])


if __name__ == '__main__':
    main()
