"""Cold start of fastgru in fresh processes: import, and import + first float32 gru_sequence call,
with the kernels in the cache folder (warm) and with an empty one (cold, so everything compiles).

Run: ``python benchmarks/cold_start.py [--runs 5]`` (nothing else running: the cold runs compile
for tens of seconds on one core). Prints a markdown table of medians over the runs.
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


def measure(call, warmup, cache_dir):
    env = dict(os.environ)
    if cache_dir is not None:
        env["FASTGRU_CACHE_DIR"] = cache_dir
    code = _PROBE.format(call=call, warmup=warmup)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return [float(v) for v in done.stdout.split()]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    measure(True, True, None)  # fill the default cache folder
    rows = []
    for label, call, warmup in [("import fastgru", False, False),
                                ("import + first float32 gru_sequence", True, False),
                                ("import + warmup(float32, float64)", False, True)]:
        warm = [measure(call, warmup, None)[-1] for _ in range(args.runs)]
        cold = []
        for _ in range(1 if call or warmup else args.runs):
            with tempfile.TemporaryDirectory(prefix="fastgru-cold-") as empty:
                cold.append(measure(call, warmup, empty)[-1])
        rows.append(f"| {label} | {np.median(warm):.2f} | {np.median(cold):.2f} |")
    print(f"fresh processes, median seconds (warm cache: {args.runs} runs; cold: an empty FASTGRU_CACHE_DIR)")
    print("| | warm cache | no cache |\n|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
