"""Why spaced calls are slower: one shape timed back to back and after pauses, on 1 and 2 threads.

    python benchmarks/spaced.py [--md benchmarks/results/<cpu>/spaced_results.md]
    FASTGRU_SPIN_US=30000 python benchmarks/spaced.py [--md benchmarks/results/<cpu>/spaced_results_spin30ms.md]

GRUSequence b1 s100 i64 h256 linear_before_reset (the spaced shape of ``bench_gru.py``), float32,
prepared op with ``out=``: the median of 200 calls back to back, and of 60 calls each after a pause
of 2-20 ms (one seed), first with fastgru's threads (the partner thread sleeps during the pauses),
then with ``fastgru.threads(1)``. Writes one markdown table. ``FASTGRU_SPIN_US`` longer than the
pauses keeps the partner thread spinning through them.
"""

import argparse
import os
import time

import numpy as np

import fastgru
from fastgru import _isa

N, S, I, H = 1, 100, 64, 256


def _op():
    rng = np.random.default_rng(0)
    scale = 1 / np.sqrt(H)
    W = rng.uniform(-scale, scale, (1, 3 * H, I)).astype(np.float32)
    R = rng.uniform(-scale, scale, (1, 3 * H, H)).astype(np.float32)
    B = rng.uniform(-scale, scale, (1, 4 * H)).astype(np.float32)
    op = fastgru.GRUSequence(W, R, B, linear_before_reset=True)
    X = rng.standard_normal((N, S, I)).astype(np.float32)
    h0, lengths = np.zeros((N, 1, H), np.float32), np.full(N, S, np.int32)
    out = (np.empty((N, 1, S, H), np.float32), np.empty((N, 1, H), np.float32))
    return lambda: op(X, h0, lengths, out=out)


def _median_us(call, pauses):
    times = []
    for pause in pauses:
        if pause:
            time.sleep(pause)
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--md", default=None, help="write the table here too")
    args = parser.parse_args(argv)
    call = _op()
    for _ in range(20):
        call()
    spaced = np.random.default_rng(1).uniform(0.002, 0.02, 60)
    rows = []
    for label, threads in (("fastgru's threads", fastgru.get_num_threads()), ("one thread", 1)):
        with fastgru.threads(threads):
            back = _median_us(call, [0] * 200)
            gaps = _median_us(call, spaced)
        rows.append(f"| {label} ({threads}) | {back:,.1f} | {gaps:,.1f} | {gaps / back:.2f} |")
    text = "\n".join(
        [
            "| threads | back to back µs | after 2-20 ms pauses µs | ratio |",
            "|---|---|---|---|",
            *rows,
            "",
            f"GRUSequence b{N} s{S} i{I} h{H} lbr1 float32, prepared op with out=; medians. "
            f"Geometry {_isa.GEOMETRY.name}, compiled for {_isa.TARGET_CPU}; "
            f"FASTGRU_SPIN_US {os.environ.get('FASTGRU_SPIN_US', 'unset (1000)')}.",
            "",
        ]
    )
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
