"""Cold start of fastgru in fresh processes: import; import + first float32 gru_sequence call; import +
warmup of every kernel path of both compute dtypes. Each with the kernels in the cache folder, and
with an empty cache folder (so that everything compiles).

Run: ``python benchmarks/cold_start.py [--runs 5] [--cold-runs 3]``, with nothing else running: the
empty-cache runs compile for about 10 s (first call) and 67 s (warmup) each, on one core. Every row
is the median over ``--runs`` fresh processes with the kernels in the cache and ``--cold-runs`` with
an empty one (a new temporary FASTGRU_CACHE_DIR each, removed afterwards), printed with the min-max
of the runs as the markdown table of README.md, "Start-up and the kernel cache".
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

_PROBE = """
import time
start = time.perf_counter()
import fastgru
imported = time.perf_counter() - start
if {call}:
    import numpy as np
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4, 10, 16), dtype=np.float32)
    W = rng.standard_normal((1, 96, 16), dtype=np.float32)
    R = rng.standard_normal((1, 96, 32), dtype=np.float32)
    fastgru.gru_sequence(X, np.zeros((4, 1, 32), np.float32), [10, 7, 3, 0], W, R, np.zeros((1, 96), np.float32))
if {warmup}:
    fastgru.warmup(dtypes=["float32", "float64"])
print(imported, time.perf_counter() - start)
"""

#: (row of the README's table, first gru_sequence call, warmup of both dtypes)
ROWS = [
    ("`import fastgru`", False, False),
    ("`import fastgru` + first float32 `gru_sequence`", True, False),
    ('`import fastgru` + `warmup(dtypes=["float32", "float64"])` (every kernel path)', False, True),
]


def measure(call, warmup, cache_dir):
    """Seconds of one fresh process: (import, whole probe); ``cache_dir`` None is the default folder."""
    env = dict(os.environ)
    if cache_dir is not None:
        env["FASTGRU_CACHE_DIR"] = cache_dir
    code = _PROBE.format(call=call, warmup=warmup)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return [float(v) for v in done.stdout.split()]


def cell(seconds):
    """The median and the min-max of some runs, as the table shows them."""
    if len(seconds) == 1:
        return f"{seconds[0]:.2f}"
    return f"{np.median(seconds):.2f} ({min(seconds):.2f}-{max(seconds):.2f})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per row with the kernels in the cache")
    parser.add_argument("--cold-runs", type=int, default=3, help="fresh processes per row with an empty cache")
    args = parser.parse_args(argv)
    measure(True, True, None)  # fill the default cache folder
    lines = [
        f"| fresh process, seconds: median (min-max) | kernels in the cache, median of {args.runs} | empty cache, "
        f"median of {args.cold_runs} |",
        "|---|---|---|",
    ]
    for label, call, warmup in ROWS:
        warm = [measure(call, warmup, None)[-1] for _ in range(args.runs)]
        cold = []
        for _ in range(args.cold_runs):
            with tempfile.TemporaryDirectory(prefix="fastgru-cold-") as empty:
                cold.append(measure(call, warmup, empty)[-1])
        lines.append(f"| {label} | {cell(warm)} | {cell(cold)} |")
        print(lines[-1], file=sys.stderr, flush=True)  # progress: the empty-cache rows take minutes
    print("\n".join(lines))


if __name__ == "__main__":
    main()
