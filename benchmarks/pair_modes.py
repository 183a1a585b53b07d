"""The host's modes: a one-row sequence timed every half second, in several processes, to see
whether the machine switches between fast and slow states while it runs.

    python benchmarks/pair_modes.py [--processes 6] [--seconds 10] [--md FILE]

A one-row call shares its row between two threads that meet at every step (the partner thread, or
a Numba parallel region with FASTGRU_SPIN_US=0), so its time follows how fast the two cores reach
each other. On a virtual machine that depends on where the host runs the two virtual CPUs at the
moment, which may change within a process: an A/B of such calls must alternate processes over
time and compare medians of many (``ab_pairs.py``), and one run's figure may sit in either mode.
Shape: GRUSequence b1 s100 i64 h256 (``bench_gru``'s seq-b1-s100-i64-h256-lbr0), float32, out=,
2 threads. Each process prints the median µs of each half second; the table gives them per
process, with the partner on and off. Run nothing else meanwhile.
"""

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = """
import statistics, sys, time
import numpy as np
import fastgru
rng = np.random.default_rng(0)
h, i, s = 256, 64, 100
bound = 1 / np.sqrt(h)
W, R, B = (rng.uniform(-bound, bound, shape).astype(np.float32) for shape in ((1, 3 * h, i), (1, 3 * h, h), (1, 3 * h)))
op = fastgru.GRUSequence(W, R, B, hidden_size=h)
X, h0 = rng.standard_normal((1, s, i)).astype(np.float32), np.zeros((1, 1, h), np.float32)
out = (np.empty((1, 1, s, h), np.float32), np.empty((1, 1, h), np.float32))
warm = time.perf_counter() + 0.5
while time.perf_counter() < warm:
    op(X, h0, None, out=out)
for _ in range(int(float(sys.argv[1]) * 2)):
    times, stop = [], time.perf_counter() + 0.5
    while time.perf_counter() < stop:
        start = time.perf_counter()
        op(X, h0, None, out=out)
        times.append(time.perf_counter() - start)
    print(round(statistics.median(times) * 1e6))
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--md", default=None)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from conftest import machine_info, run_conditions, show

    rows = []
    for k in range(args.processes):
        for partner in ("on", "off"):
            env = {**os.environ, **({"FASTGRU_SPIN_US": "0"} if partner == "off" else {})}
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, str(args.seconds)], env=env, capture_output=True, text=True, check=True
            )
            medians = [int(line) for line in done.stdout.split()]
            rows.append((k + 1, partner, medians))
            print(k + 1, partner, *medians, flush=True)
    machine = machine_info()
    lines = ["| process | partner | µs per call, each half second | lowest | highest |", "|---|---|---|---|---|"]
    for k, partner, medians in rows:
        lines.append(f"| {k} | {partner} | {' '.join(map(str, medians))} | {min(medians)} | {max(medians)} |")
    lines += [
        "",
        f"{machine['cpu']} ({machine['isa']}, geometry {machine['geometry']} compiled for {machine['compiled_for']}); "
        f"GRUSequence b1 s100 i64 h256, float32, out=, 2 threads; the partner off: FASTGRU_SPIN_US=0 (a Numba "
        f"parallel region shares the row); median of all: {statistics.median(m for row in rows for m in row[2])} µs; "
        f"{run_conditions()}",
        "",
    ]
    show("\n".join(lines), args.md)


if __name__ == "__main__":
    main()
