"""``python -m fastgru warmup --jobs N`` with an empty cache folder: wall and CPU seconds per N.

    python benchmarks/warmup_jobs.py [--jobs 1 2] [--rounds 3] [--md benchmarks/results/<cpu>/warmup_jobs_results.md]

Each round runs the command once per N, in a fresh process with a new empty ``--cache-dir``, the
order of the N alternating from round to round; the table gives the medians over the rounds of the
wall time (from the command's start to its end, the final load of every kernel included) and of the
CPU time of the command and the processes it started.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from conftest import compiled_line, show


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(jobs):
    """(wall seconds, CPU seconds) of one warmup with ``jobs`` processes into a new empty folder."""
    with tempfile.TemporaryDirectory() as folder:
        command = [sys.executable, "-m", "fastgru", "warmup", "--cache-dir", folder, "--jobs", str(jobs)]
        cpu, start = _children_cpu(), time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        return time.perf_counter() - start, _children_cpu() - cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--md", default=None)
    args = parser.parse_args(argv)
    times = {jobs: [] for jobs in args.jobs}
    for k in range(args.rounds):
        for jobs in args.jobs if k % 2 == 0 else args.jobs[::-1]:
            times[jobs].append(run(jobs))
            print(f"round {k + 1}, --jobs {jobs}: {times[jobs][-1][0]:.1f} s wall", file=sys.stderr)
    lines = ["| --jobs | wall s | CPU s | each round's wall s |", "|---|---|---|---|"]
    for jobs, runs in times.items():
        walls = ", ".join(f"{wall:.1f}" for wall, _ in runs)
        wall, cpu = statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)
        lines.append(f"| {jobs} | {wall:.1f} | {cpu:.1f} | {walls} |")
    lines += [
        "",
        f"`python -m fastgru warmup --cache-dir EMPTY --jobs N` (its defaults: float32, the three ops), "
        f"{args.rounds} alternating rounds, medians; {compiled_line()}; {os.cpu_count()} CPUs; "
        f"{time.strftime('%Y-%m-%d')}.",
    ]
    show("\n".join(lines) + "\n", args.md)


if __name__ == "__main__":
    main()
