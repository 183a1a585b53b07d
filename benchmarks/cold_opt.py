"""How much of an empty-cache first call LLVM's optimisation takes: the first call at each
NUMBA_OPT level (3, Numba's default, down to 0), and what the level does to a kernel's speed.

    python benchmarks/cold_opt.py [--runs 2] [--md PATH]

Per level, ``--runs`` fresh processes (levels alternating) time cold_ab.py's first float32
gru_sequence call (b4 s10 i16 h32 bidirectional) from the interpreter's start with a new, empty
FASTGRU_CACHE_DIR; then ``ab.py seq-b64-s100-i256-h256-lbr0`` and ``ab.py
seq-b1-s100-i64-h256-lbr1`` time two benchmark shapes' prepared op compiled at that level (a
process that fills a cache folder of that level, then one that times). fastgru keeps Numba's default; this measures
whether a lower level would be a lever for the compile time.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cold_ab import _CASES
from conftest import _cpu_model, show

HERE = Path(__file__).resolve().parent
LEVELS = ("3", "2", "1", "0")
SHAPES = ("seq-b64-s100-i256-h256-lbr0", "seq-b1-s100-i64-h256-lbr1")


def _first_call(level):
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_OPT": level, "FASTGRU_CACHE_DIR": cache}
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", _CASES["first gru_sequence call"]], env=env, check=True, capture_output=True
        )
        return time.perf_counter() - start


def _speed_us(level, shape):
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_OPT": level, "FASTGRU_CACHE_DIR": cache}
        for seconds in ("0.1", "1.5"):  # the first process fills the cache (a kernel may compile after its warm-up)
            command = [sys.executable, str(HERE / "ab.py"), shape, "--seconds", seconds]
            done = subprocess.run(command, env=env, check=True, capture_output=True)
        return float(done.stdout.split()[0])  # ab.py: "<µs> µs median of ..."


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--md")
    args = parser.parse_args(argv)
    first = {level: [] for level in LEVELS}
    for k in range(args.runs):
        for level in LEVELS if k % 2 == 0 else LEVELS[::-1]:
            first[level].append(_first_call(level))
            print(level, first[level][-1], flush=True)
    speeds = {level: [_speed_us(level, shape) for shape in SHAPES] for level in LEVELS}
    lines = [
        "| NUMBA_OPT | first gru_sequence call, empty cache, s | " + " | ".join(f"{s} µs" for s in SHAPES) + " |",
        "|---|---|" + "---|" * len(SHAPES),
    ]
    for level in LEVELS:
        runs = ", ".join(f"{t:.1f}" for t in first[level])
        cells = " | ".join(f"{us:,.1f}" for us in speeds[level])
        lines.append(f"| {level} | {statistics.median(first[level]):.1f} ({runs}) | {cells} |")
    model = _cpu_model()
    lines += [
        "",
        f"{model}; first call: median of {args.runs} fresh processes per level (each run in parentheses), from the "
        f"interpreter's start; speeds: one process per level and shape, ab.py's median; {time.strftime('%Y-%m-%d')}.",
        "",
    ]
    text = "\n".join(lines)
    show(text, args.md)


if __name__ == "__main__":
    main()
