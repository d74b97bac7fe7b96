#!/usr/bin/python3
"""The Python module against the C++ calls it wraps, in one run: rb.sample(256) of 3x64x64 uint8
rows, rb.extend() of a 3 MiB trajectory given as torch tensors (against a memcpy of its bytes into a
ring of the buffer's size, as bench_replay's baseline),
to_dict() of a 1000-leaf tree and a weight subscriber's latest(). Each case alternates Python and
C++ (bench_python_baseline) over several rounds and reports the medians.

  PYTHONPATH=build/python /usr/bin/python3 tools/bench_python.py [--rounds 5] [--quick] [--csv]
      [--baseline build/tools/bench_python_baseline]
"""
import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import time

import torch

import tensortree

ROW_SHAPE = (3, 64, 64)


def per_call(fn, seconds):
    """Mean seconds per call of fn, run for at least `seconds` after two untimed calls."""
    fn()
    fn()
    calls, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds or calls < 5:
        fn()
        calls += 1
    return elapsed / calls


class Baseline:
    def __init__(self, program, seconds):
        self.program, self.seconds = program, seconds

    def __call__(self, *args):
        ran = subprocess.run([self.program, *map(str, args), str(self.seconds)], stdout=subprocess.PIPE, text=True,
                             check=True)
        return float(ran.stdout)


def pixels(rows):
    return {"pixels": torch.randint(0, 256, (rows, *ROW_SHAPE), dtype=torch.uint8)}


def median_pair(rounds, python_fn, cpp_fn):
    python_times, cpp_times = [], []
    for _ in range(rounds):
        python_times.append(python_fn())
        cpp_times.append(cpp_fn())
    return statistics.median(python_times), statistics.median(cpp_times)


def replay_cases(args, baseline, name):
    rb = tensortree.ReplayBuffer.create(name, capacity=args.capacity)
    for first in range(0, args.capacity, 256):
        rb.extend(pixels(256))
    path = str(rb.path)
    sample = median_pair(args.rounds, lambda: per_call(lambda: rb.sample(256), args.seconds),
                         lambda: baseline("sample", path, 256))
    trajectory = pixels(256)  # 3 MiB
    nbytes = trajectory["pixels"].numel()
    extend = median_pair(args.rounds, lambda: per_call(lambda: rb.extend(trajectory), args.seconds),
                         lambda: baseline("memcpy", nbytes, args.capacity * nbytes // 256))
    cpp_extend = baseline("extend", path, 256)
    return [
        ("rb.sample(256), 3x64x64 uint8 rows", sample[0], sample[1], "C++ sample(256)", sample[0] / sample[1],
         "python/C++ <= 1.15"),
        ("rb.extend(3 MiB trajectory of torch tensors)", extend[0], extend[1], "memcpy into a ring",
         extend[1] / extend[0], "memcpy/python >= 0.8"),
        ("C++ extend of the same 3 MiB", cpp_extend, extend[1], "memcpy into a ring", extend[1] / cpp_extend,
         "(reference)"),
    ]


def to_dict_cases(args):
    """to_dict() of a consolidated tree of 1000 leaves: making the torch views (the first call on a
    tree), and again on the unchanged tree (the views kept on it)."""
    tree = tensortree.TensorTree({f"leaf{i}": torch.full((4, 4), float(i)) for i in range(1000)},
                                 batch_size=[4]).consolidate()

    def first():
        tree.__dict__.pop("_torch_views", None)
        return tree.to_dict()

    made = statistics.median(per_call(first, args.seconds) for _ in range(args.rounds))
    again = statistics.median(per_call(tree.to_dict, args.seconds) for _ in range(args.rounds))
    return [("to_dict() of 1000 leaves, first call", made, float("nan"), "-", float("nan"), "<= 100 us"),
            ("to_dict() of 1000 leaves, unchanged tree", again, float("nan"), "-", float("nan"), "<= 100 us")]


def latest_case(args, baseline, name):
    publisher = tensortree.WeightPublisher(name, replace=True)
    publisher.publish({"w": torch.zeros(1 << 16)})
    subscriber = tensortree.WeightSubscriber(name)

    def take():
        with subscriber.latest():
            pass

    python, cpp = median_pair(args.rounds, lambda: per_call(take, args.seconds), lambda: baseline("latest", name))
    return ("with subscriber.latest(): (taken, released)", python, cpp, "C++ latest()", python / cpp, "<= 5 us")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a small buffer and short timings (CI)")
    parser.add_argument("--csv", action="store_true")
    parser.add_argument("--baseline", default=os.path.join(os.path.dirname(__file__), "..", "build", "tools",
                                                           "bench_python_baseline"))
    args = parser.parse_args()
    args.capacity, args.seconds = (1024, 0.02) if args.quick else (8192, 0.3)
    if args.quick:
        args.rounds = 1
    baseline = Baseline(args.baseline, args.seconds)
    name = f"bench_python_{os.getpid()}"
    try:
        rows = replay_cases(args, baseline, name) + to_dict_cases(args) + [latest_case(args, baseline, name)]
    finally:
        shutil.rmtree(tensortree.ReplayBuffer.shared_memory_path(name), ignore_errors=True)
    header = ["case", "python us", "baseline us", "baseline", "ratio", "goal"]
    table = [[case, f"{p * 1e6:.1f}", "-" if b != b else f"{b * 1e6:.1f}", what, "-" if r != r else f"{r:.3f}", goal]
             for case, p, b, what, r, goal in rows]
    if args.csv:
        csv.writer(sys.stdout, lineterminator="\n").writerows([header] + table)
        return 0
    widths = [max(len(row[c]) for row in [header] + table) for c in range(len(header))]
    for row in [header] + table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
