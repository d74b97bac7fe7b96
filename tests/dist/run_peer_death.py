#!/usr/bin/env python3
"""Runs peer_death under mpiexec with Open MPI's recovery mode and checks what every survivor
wrote: there the launcher outlives a dead rank, but it does not report the survivors' exit codes.

Usage: run_peer_death.py RANKS MPIEXEC [MPIEXEC_ARGS...] -- PROGRAM
Fails when the run takes longer than its limit, or any survivor wrote anything but "ok" (or
nothing at all: it crashed, hung past the limit, or never got that far)."""
import os
import subprocess
import sys
import tempfile

LIMIT_SECONDS = 120


def main(argv):
    ranks = int(argv[1])
    split = argv.index("--")
    launcher, program = argv[2:split], argv[split + 1:]
    with tempfile.TemporaryDirectory() as results:
        env = dict(os.environ, TT_PEER_DEATH_RESULTS=results)
        command = launcher + ["--enable-recovery", "-x", "TT_PEER_DEATH_RESULTS", "-n", str(ranks)] + program
        print(" ".join(command), flush=True)
        try:
            subprocess.run(command, env=env, timeout=LIMIT_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            print(f"FAIL: the run took longer than {LIMIT_SECONDS} s")
            return 1
        failed = False
        for rank in range(ranks - 1):
            path = os.path.join(results, f"rank-{rank}")
            text = open(path).read() if os.path.exists(path) else "no result (crashed or never finished)\n"
            print(f"survivor {rank}: {text}", end="")
            failed |= text != "ok\n"
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
