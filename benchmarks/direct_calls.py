"""The function API's one-row, one-step call (computed from the caller's W and R as they are) beside
the prepared cell of the same weights.

    python benchmarks/direct_calls.py [--rounds 9] [--md PATH]
    NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES="" FASTGRU_ISA=avx2 python benchmarks/direct_calls.py   # AVX2 code

``fastgru.gru_cell(x, h, W, R, B)`` at batch 1, float32, inputs = H, the same arrays at every call,
and the prepared ``fastgru.GRUCell(W, R, B)(x, h, out=h)`` in its default path, in alternating
rounds of calls in one process. The table gives the medians of the rounds and their ratio.
"""

import argparse
import statistics
import time

import numpy as np
from conftest import compiled_line, run_conditions, show

import fastgru

HIDDEN = (64, 128, 256, 384, 512)


def _calls(n_hidden):
    rng = np.random.default_rng(0)
    scale = np.float32(1 / np.sqrt(n_hidden))
    W, R = (rng.uniform(-scale, scale, (3 * n_hidden, n_hidden)).astype(np.float32) for _ in range(2))
    B = rng.uniform(-scale, scale, 3 * n_hidden).astype(np.float32)
    x, h = rng.standard_normal((1, n_hidden)).astype(np.float32), np.zeros((1, n_hidden), np.float32)
    cell, state = fastgru.GRUCell(W, R, B), h.copy()
    return (lambda: fastgru.gru_cell(x, h, W, R, B)), (lambda: cell(x, state, out=state))


def _round_us(call, n):
    for _ in range(3):  # the prepared cell's partner joins a burst from its third call
        call()
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n * 1e6


def measure(rounds):
    rows = []
    for n_hidden in HIDDEN:
        ways = dict(zip(("function", "prepared"), _calls(n_hidden)))
        n = max(20, 2_000_000 // (n_hidden * n_hidden))
        times = {way: [] for way in ways}
        for k in range(rounds):
            for way in ways if k % 2 == 0 else list(ways)[::-1]:
                times[way].append(_round_us(ways[way], n))
        function, prepared = (statistics.median(times[way]) for way in ways)
        rows.append((n_hidden, function, prepared))
        print(f"h{n_hidden}: function {function:.1f}, prepared {prepared:.1f}", flush=True)
    return rows


def markdown(rows, rounds):
    lines = ["| H | gru_cell(x, h, W, R, B) µs | prepared cell µs | ratio |", "|---|---|---|---|"]
    for n_hidden, function, prepared in rows:
        lines.append(f"| {n_hidden} | {function:,.1f} | {prepared:,.1f} | {function / prepared:.2f} |")
    lines += [
        "",
        f"{compiled_line()}; batch 1, float32, inputs = H, the same arrays at every call; "
        f"medians of {rounds} alternating rounds in one process; " + run_conditions(),
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--md", default=None, help="write the table here too")
    args = parser.parse_args(argv)
    text = markdown(measure(args.rounds), args.rounds)
    show(text, args.md)


if __name__ == "__main__":
    main()
