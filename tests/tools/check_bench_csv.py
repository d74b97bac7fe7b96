#!/usr/bin/env python3
"""Runs a benchmark with --csv and checks that what it printed is CSV that Python's csv module (and so
pandas) reads as a table: a header and at least one row, every row as many columns as the header, no
column name twice. The benchmark's own exit status passes through (77: skipped), and its output is
echoed for the test log.

Usage: check_bench_csv.py PROGRAM ARGS...   (ARGS include --csv; PROGRAM may be mpiexec)
"""

import csv
import io
import subprocess
import sys


def problems(text):
    """What is wrong with `text` as one CSV table; empty when nothing is."""
    rows = list(csv.reader(io.StringIO(text, newline=""), strict=True))
    if len(rows) < 2:
        return [f"expected a header and at least one row, got {len(rows)} line(s)"]
    header = rows[0]
    found = []
    if len(set(header)) != len(header):
        found.append(f"a column name appears twice in the header {header}")
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            found.append(f"row {number} has {len(row)} columns, the header {len(header)}: {row}")
    return found


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    ran = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, text=True)
    sys.stdout.write(ran.stdout)
    if ran.returncode != 0:
        return ran.returncode
    try:
        found = problems(ran.stdout)
    except csv.Error as error:
        found = [f"Python's csv module refuses it: {error}"]
    for problem in found:
        print(f"check_bench_csv: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
