"""A/B of two checkouts over the calls a change of the engine must keep as fast: small calls, the
function API, a stack's frame and sequence, a state pool's step and a fastgru.torch module.

    python benchmarks/engine_ab.py OLD_CHECKOUT NEW_CHECKOUT [--items NAME ...] [--pairs 5]
                                   [--seconds 1.5] [--md benchmarks/ab/<cpu>/engine_ab.md]

For each item, ``--pairs`` times: a process with OLD's fastgru on the path, then one with NEW's (the
order alternates from pair to pair), each running this file's ``--item NAME`` (public API only, so
that both checkouts run the same calls), which times the item for ``--seconds`` after its warm-up
and prints the median of its blocks' per-call means. Before the pairs, one untimed process per
checkout fills its cache. The table gives the median over the processes of their medians, NEW / OLD,
and a 95% bootstrap interval of that ratio (``ab_pairs.ratio_interval``): an interval that holds 1
has not shown a difference. The batch shapes of the benchmark have their own A/B: ``ab_pairs.py``.

Items (float32, 2 threads, warm):

- ``cell-i4-h4``, ``cell-i256-h256``: a prepared GRUCell at batch 1, ``cell(x, h, out=h)``;
- ``seq-b1-s1-i4-h4``: a prepared GRUSequence of one row and one step with ``out=``;
- ``fn-cell-i4-h4``, ``fn-cell-i256-h256``: ``fastgru.gru_cell(x, h, W, R, B)``, the same arrays;
- ``stack-3x256-frame``, ``stack-3x256-seq100``: a GRUStack of 3 forward layers (input 128, hidden
  256, linear_before_reset, as ``from_torch`` makes them), one row, 1 or 100 steps per call,
  ``stack(x, state, None, out=(y, state))``;
- ``pool-64-i256-h256``: ``pool.step(ids, X, out=H)`` of 64 streams of a GRUCell;
- ``torch-2x256-frame``: ``fastgru.torch.optimize`` of a torch.nn.GRU (128, 256, 2 layers,
  batch_first) called on one frame, its state carried, under ``torch.inference_mode()``.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ITEMS = (
    "cell-i4-h4",
    "seq-b1-s1-i4-h4",
    "cell-i256-h256",
    "fn-cell-i4-h4",
    "fn-cell-i256-h256",
    "stack-3x256-frame",
    "stack-3x256-seq100",
    "pool-64-i256-h256",
    "torch-2x256-frame",
)


def _weights(rng, i, h, lead=(), gates=3):
    scale = 1 / np.sqrt(h)
    return [
        rng.uniform(-scale, scale, (*lead, *shape)).astype(np.float32)
        for shape in ((3 * h, i), (3 * h, h), (gates * h,))
    ]


def make(name):
    """The call of item ``name``, ready to time (its arrays made once)."""
    import fastgru

    rng = np.random.default_rng(0)
    if name.startswith("cell-") or name.startswith("fn-cell-"):
        size = int(name.rsplit("-h", 1)[1])
        W, R, B = _weights(rng, size, size)
        x, h = rng.standard_normal((1, size), dtype=np.float32), np.zeros((1, size), np.float32)
        if name.startswith("fn-"):
            return lambda: fastgru.gru_cell(x, h, W, R, B)
        cell = fastgru.GRUCell(W, R, B)
        return lambda: cell(x, h, out=h)
    if name == "seq-b1-s1-i4-h4":
        W, R, B = _weights(rng, 4, 4, (1,))
        seq = fastgru.GRUSequence(W, R, B)
        X, h0, lengths = rng.standard_normal((1, 1, 4), dtype=np.float32), np.zeros((1, 1, 4), np.float32), [1]
        lengths = np.array(lengths)
        out = (np.empty((1, 1, 1, 4), np.float32), np.empty((1, 1, 4), np.float32))
        return lambda: seq(X, h0, lengths, out=out)
    if name.startswith("stack-"):
        steps = 1 if name.endswith("frame") else 100
        layers = [
            fastgru.GRUSequence(*_weights(rng, i, 256, (1,), gates=4), linear_before_reset=True)
            for i in (128, 256, 256)
        ]
        stack = fastgru.GRUStack(layers)
        x = rng.standard_normal((1, steps, 128), dtype=np.float32)
        state = np.zeros((1, stack.state_size), np.float32)
        y = np.empty((1, 1, steps, 256), np.float32)
        return lambda: stack(x, state, None, out=(y, state))
    if name == "pool-64-i256-h256":
        cell = fastgru.GRUCell(*_weights(rng, 256, 256, gates=4), linear_before_reset=True)
        pool = fastgru.StatePool(cell, 64)
        ids = np.array([pool.open() for _ in range(64)])
        X, H = rng.standard_normal((64, 256), dtype=np.float32), np.empty((64, 256), np.float32)
        return lambda: pool.step(ids, X, out=H)
    if name == "torch-2x256-frame":
        import torch

        import fastgru.torch

        torch.manual_seed(0)
        model = fastgru.torch.optimize(torch.nn.GRU(128, 256, 2, batch_first=True))
        x, state = torch.randn(1, 1, 128), [torch.zeros(2, 1, 256)]

        def frame():
            with torch.inference_mode():
                _, state[0] = model(x, state[0])

        return frame
    raise ValueError(f"unknown item {name!r}; expected one of {', '.join(ITEMS)}")


def time_item(name, seconds):
    """The median over blocks of ``seconds`` of the per-call mean time of item ``name``, in µs."""
    import numba

    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    call = make(name)
    start = time.perf_counter()
    while time.perf_counter() - start < 0.5:  # compiled, warm, the partner awake
        call()
    per_block = max(1, int(0.01 / max(_one(call), 1e-7)))  # blocks of about 10 ms
    means, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter_ns()
        for _ in range(per_block):
            call()
        means.append((time.perf_counter_ns() - t0) / per_block / 1e3)
    return statistics.median(means)


def _one(call):
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def _median_us(checkout, item, seconds):
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    run = [sys.executable, str(HERE / "engine_ab.py"), "--item", item, "--seconds", str(seconds)]
    out = subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout
    where, value = out.split()[-3], float(re.search(r"([\d.]+) µs", out).group(1))
    if not where.startswith(str(Path(checkout).resolve())):
        raise RuntimeError(f"the process ran the fastgru of {where}, not {checkout}'s")
    return value


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", nargs="?")
    parser.add_argument("new", nargs="?")
    parser.add_argument("--item", help="time one item in this process (with the fastgru on the path)")
    parser.add_argument("--items", nargs="*", default=list(ITEMS))
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--md")
    args = parser.parse_args(argv)
    if args.item:
        import fastgru

        print(f"{Path(fastgru.__file__).resolve().parent} {time_item(args.item, args.seconds):.3f} µs")
        return
    sys.path.insert(0, str(HERE))
    from ab_pairs import ratio_interval

    rows = []
    for item in args.items:
        for checkout in (args.old, args.new):
            _median_us(checkout, item, 0.2)  # fills the checkout's cache
        old, new = [], []
        for k in range(args.pairs):
            order = ((args.old, old), (args.new, new)) if k % 2 == 0 else ((args.new, new), (args.old, old))
            for checkout, into in order:
                into.append(_median_us(checkout, item, args.seconds))
        a, b = statistics.median(old), statistics.median(new)
        lo, hi = ratio_interval(old, new)
        rows.append((item, a, b, b / a, lo, hi))
        print(f"{item}: {a:,.2f} -> {b:,.2f} µs, {b / a:.3f} [{lo:.3f}, {hi:.3f}]", flush=True)
    table = [
        "| item | old µs | new µs | new / old | 95% interval |",
        "|---|---|---|---|---|",
        *(f"| {item} | {a:,.2f} | {b:,.2f} | {r:.3f} | {lo:.3f}-{hi:.3f} |" for item, a, b, r, lo, hi in rows),
    ]
    text = "\n".join(table)
    print(text)
    if args.md:
        Path(args.md).write_text(text + "\n")


if __name__ == "__main__":
    main()
