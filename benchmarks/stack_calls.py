"""The small calls this stop's changes touch, timed in one process on the checkout on the path, so
that two checkouts can be compared (``PYTHONPATH=OLD python benchmarks/stack_calls.py``):

- ``GRUSequence b1 s1 i4 h4, sequence_lengths=None`` beside ``sequence_lengths=ones``: a call
  without lengths used to make a new plan every time;
- ``GRUSequence b1 s100 i128 h256, back to back``: a one-row call longer than the partner's spin
  and under PAIR_WAKE_FLOPS, and the kernel the last call ran (the partner used to miss them);
- ``GRUStack 3 x h4 frame`` beside the same layers called one after another with ``out=``, and
  ``GRUStack 2 x i256 h256 frame, one thread`` (fastgru.torch's thread count at batch 1): the
  stack's Python around its kernel (rows left out where the checkout has no GRUStack).

float32; each row the median of 9 rounds' per-call means. Prints a markdown table; ``--md FILE``
appends it, with the machine, to FILE.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import machine_info  # noqa: E402

import fastgru  # noqa: E402


def _us(call, calls):
    rounds = []
    for _ in range(9):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        rounds.append((time.perf_counter_ns() - start) / calls / 1000)
    return statistics.median(rounds)


def _sequence(rng, i, h):
    scale = 1 / np.sqrt(h)
    return fastgru.GRUSequence(
        rng.uniform(-scale, scale, (1, 3 * h, i)).astype(np.float32),
        rng.uniform(-scale, scale, (1, 3 * h, h)).astype(np.float32),
        np.zeros((1, 3 * h), np.float32),
    )


def rows():
    rng = np.random.default_rng(0)
    tiny = _sequence(rng, 4, 4)
    x, h0 = rng.standard_normal((1, 1, 4)).astype(np.float32), np.zeros((1, 1, 4), np.float32)
    out, ones = (np.empty((1, 1, 1, 4), np.float32), np.empty((1, 1, 4), np.float32)), np.ones(1, np.int64)
    yield "GRUSequence b1 s1 i4 h4, sequence_lengths=None", _us(lambda: tiny(x, h0, None, out=out), 2000)
    yield "GRUSequence b1 s1 i4 h4, sequence_lengths=ones", _us(lambda: tiny(x, h0, ones, out=out), 2000)
    long = _sequence(rng, 128, 256)
    X, H0 = rng.standard_normal((1, 100, 128)).astype(np.float32), np.zeros((1, 1, 256), np.float32)
    outs = (np.empty((1, 1, 100, 256), np.float32), np.empty((1, 1, 256), np.float32))
    full = np.full(1, 100, np.int64)
    yield "GRUSequence b1 s100 i128 h256, back to back", _us(lambda: long(X, H0, full, out=outs), 20)
    if not hasattr(fastgru, "GRUStack"):
        return
    layers = [_sequence(rng, 4, 4) for _ in range(3)]
    stack = fastgru.GRUStack(layers)
    state, y = np.zeros((1, stack.state_size), np.float32), np.empty((1, 1, 1, 4), np.float32)
    each = [(np.empty((1, 1, 1, 4), np.float32), np.empty((1, 1, 4), np.float32)) for _ in layers]

    def one_by_one():
        xk = x
        for op, o in zip(layers, each):
            op(xk, h0, None, out=o)
            xk = o[0].reshape(1, 1, 4)

    yield (
        "GRUStack 3 x h4 frame, stack(x, state, None, out=(y, state))",
        _us(lambda: stack(x, state, None, out=(y, state)), 2000),
    )
    yield "the same 3 layers one by one, op(x, h0, None, out=)", _us(one_by_one, 2000)
    big = fastgru.GRUStack([_sequence(rng, 256, 256), _sequence(rng, 256, 256)])
    xb, sb = rng.standard_normal((1, 1, 256)).astype(np.float32), np.zeros((1, big.state_size), np.float32)
    yb = np.empty((1, 1, 1, 256), np.float32)
    with fastgru.threads(1):
        yield "GRUStack 2 x i256 h256 frame, one thread", _us(lambda: big(xb, sb, None, out=(yb, sb)), 500)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--md")
    args = parser.parse_args(argv)
    lines = ["| call | µs |", "|---|---|"] + [f"| {name} | {us:,.1f} |" for name, us in rows()]
    machine = machine_info()
    lines += [
        "",
        f"fastgru from {Path(fastgru.__file__).parent.parent}; {machine['cpu']} ({machine['isa']}, "
        f"geometry {machine['geometry']}), {machine['numba_threads']} threads, float32, medians of 9 "
        f"rounds; {time.strftime('%Y-%m-%d')}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.md:
        with open(args.md, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
