"""One row with the partner thread or alone: the measurement behind PAIR_FROM_HIDDEN and PAIR_FROM_FLOPS.

    python benchmarks/pair_or_alone.py [--rounds 9] [--md PATH]
    NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES="" FASTGRU_ISA=avx2 python benchmarks/pair_or_alone.py   # AVX2 code

Batch-1 calls back to back, float32, prepared ops with ``out=``: GRUCell (one step) and
GRUSequence (S steps) of I inputs and H units. Each shape runs both ways in alternating rounds of
calls in one process: "pair", the thresholds set to 0 so that every one-row call shares its row
with the spinning partner; "alone", under ``fastgru.threads(1)``. The table gives the medians of
the rounds, their ratio, the path the default thresholds choose, and the packed weights' bytes
(beside the per-core L2 of the machine: a row whose weights fit one core's L2 gains less from a
second core).
"""

import argparse
import contextlib
import statistics
import time

import numpy as np
from conftest import compiled_line, run_conditions, show

import fastgru
from fastgru import _paths, _tuning

#: (steps, inputs, hidden units): cells first, then sequences.
SHAPES = (
    (1, 128, 128),
    (1, 192, 64),
    (1, 192, 192),
    (1, 512, 128),
    (1, 256, 256),
    (1, 384, 384),
    (1, 512, 512),
    (4, 64, 128),
    (16, 64, 128),
    (100, 64, 64),
    (100, 64, 128),
    (100, 64, 256),
)


def _call(steps, n_inputs, n_hidden):
    rng = np.random.default_rng(0)
    scale = 1 / np.sqrt(n_hidden)
    W = rng.uniform(-scale, scale, (3 * n_hidden, n_inputs)).astype(np.float32)
    R = rng.uniform(-scale, scale, (3 * n_hidden, n_hidden)).astype(np.float32)
    B = rng.uniform(-scale, scale, 4 * n_hidden).astype(np.float32)
    if steps == 1:
        cell = fastgru.GRUCell(W, R, B, linear_before_reset=True)
        x, h = rng.standard_normal((2, 1, n_inputs)).astype(np.float32)[0], np.zeros((1, n_hidden), np.float32)
        return cell, lambda: cell(x, h, out=h)
    op = fastgru.GRUSequence(W[None], R[None], B[None], linear_before_reset=True)
    X = rng.standard_normal((1, steps, n_inputs)).astype(np.float32)
    h0 = np.zeros((1, 1, n_hidden), np.float32)
    out = (np.empty((1, 1, steps, n_hidden), np.float32), np.empty((1, 1, n_hidden), np.float32))
    return op, lambda: op(X, h0, None, out=out)


def _round_us(call, n):
    for _ in range(3):  # the partner joins a burst from its third call
        call()
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n * 1e6


@contextlib.contextmanager
def _paired():
    """Every one-row call shares its row with the partner (the thresholds at 0) inside the block."""
    saved = _tuning.PAIR_FROM_HIDDEN, _tuning.PAIR_FROM_FLOPS
    _tuning.PAIR_FROM_HIDDEN = _tuning.PAIR_FROM_FLOPS = 0
    try:
        yield
    finally:
        _tuning.PAIR_FROM_HIDDEN, _tuning.PAIR_FROM_FLOPS = saved


def measure(rounds):
    rows = []
    for steps, n_inputs, n_hidden in SHAPES:
        op, call = _call(steps, n_inputs, n_hidden)
        n = max(20, 20_000 // steps // max(1, n_hidden // 64))
        ways = {"pair": _paired, "alone": lambda: fastgru.threads(1)}
        times = {way: [] for way in ways}
        for k in range(rounds):
            for way in ways if k % 2 == 0 else list(ways)[::-1]:
                with ways[way]():
                    times[way].append(_round_us(call, n))
        pair, alone = statistics.median(times["pair"]), statistics.median(times["alone"])
        flops = 2 * steps * 3 * n_hidden * (n_inputs + n_hidden)
        chosen = _paths.choose(1, steps, 1, n_hidden, flops)
        kib = 3 * n_hidden * (n_inputs + n_hidden) * 4 / 1024
        rows.append((steps, n_inputs, n_hidden, pair, alone, chosen, kib))
        print(f"s{steps} i{n_inputs} h{n_hidden}: pair {pair:.1f} alone {alone:.1f} ({pair / alone:.2f})", flush=True)
    return rows


def markdown(rows, rounds):
    lines = [
        "| call | weights KiB | pair µs | alone µs | pair / alone | default path |",
        "|---|---|---|---|---|---|",
    ]
    for steps, n_inputs, n_hidden, pair, alone, chosen, kib in rows:
        what = f"cell i{n_inputs} h{n_hidden}" if steps == 1 else f"sequence s{steps} i{n_inputs} h{n_hidden}"
        lines.append(f"| {what} | {kib:,.0f} | {pair:,.1f} | {alone:,.1f} | {pair / alone:.2f} | {chosen} |")
    lines += [
        "",
        f"{compiled_line()}, L2 per core {_tuning.core_l2_bytes() // 1024} KiB; "
        f"batch 1, float32, linear_before_reset, prepared ops with out=; medians of {rounds} alternating rounds; "
        + run_conditions(),
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
