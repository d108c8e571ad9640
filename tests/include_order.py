#!/usr/bin/env python3
"""include_order.py - the files of a folder include each other one way.

Usage: include_order.py DIR...

Within each DIR, X.c and X.h are one component; X stands on Y when X.c or
X.h includes "Y.h" of the same DIR.  Fails (exit 1), naming the cycle, if
components stand on each other in a circle; else prints the order, bottom
first (the order the folder's main header and HACKING.md describe)."""
import os
import re
import sys

INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def graph(folder):
    files = [f for f in os.listdir(folder) if f.endswith(('.c', '.h'))]
    headers = {f for f in files if f.endswith('.h')}
    stem = lambda f: f.rsplit('.', 1)[0]
    edges = {stem(f): set() for f in files}
    for f in files:
        with open(os.path.join(folder, f), errors='replace') as fh:
            for line in fh:
                m = INCLUDE.match(line)
                if m and m.group(1) in headers and \
                        stem(m.group(1)) != stem(f):
                    edges[stem(f)].add(stem(m.group(1)))
    return edges


def order_or_cycle(edges):
    """(bottom-first order, None), or (None, a cycle)."""
    state, order, path = {}, [], []

    def visit(n):
        state[n] = 'open'
        path.append(n)
        for m in sorted(edges[n]):
            if state.get(m) == 'open':
                return path[path.index(m):] + [m]
            if m not in state:
                cycle = visit(m)
                if cycle:
                    return cycle
        path.pop()
        state[n] = 'done'
        order.append(n)
        return None

    for n in sorted(edges):
        if n not in state:
            cycle = visit(n)
            if cycle:
                return None, cycle
    return order, None


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    failed = False
    for folder in sys.argv[1:]:
        order, cycle = order_or_cycle(graph(folder))
        name = os.path.basename(os.path.normpath(folder))
        if cycle:
            print(f"FAIL {name}/: includes go in a circle: "
                  f"{' -> '.join(cycle)}")
            failed = True
        else:
            print(f"PASS {name}/: {' <- '.join(order)}")
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
