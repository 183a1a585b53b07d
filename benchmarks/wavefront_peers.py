"""A stack that may run as a wavefront, beside ONNX Runtime and torch in one process: fastgru as it
runs it (the wavefront raced against the layers' own paths) beside the wavefront at every call and
the layers' paths at every call.

    python benchmarks/wavefront_peers.py [--rounds 9] [--calls 1000] [--md PATH]

Each row is a stack of ``stacks.py`` (torch.nn.GRU, input 128, batch 1, float32, 2 threads for every
runtime) over 100 steps in one call, timed as ``stacks.py`` times its rows: a block of calls of each
implementation in turn, the order alternating from round to round, each block after a pause of
20 ms and three untimed calls. The implementations are stacks.py's (fastgru's stack, the layers one
by one, ONNX Runtime's graph with IOBinding, torch, fastgru.torch) and two more fastgru stacks of the
same layers: ``GRUStack.run(..., path="wave")`` at every call, and ``path="pair"`` (the layers'
paths at hidden size 128 and more) at every call. ONNX Runtime's and torch's workers spin after
their calls, on the core fastgru's partner thread runs its half on (``peer_spinning.py``).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import stacks  # noqa: E402  (imports conftest first, as stacks.py does)
from conftest import machine_info, show  # noqa: E402
from peers import THREADS  # noqa: E402

import fastgru  # noqa: E402
from fastgru._dispatch import NO_ROWS  # noqa: E402

SHAPES = [(2, 128), (3, 128), (4, 128)]
STEPS = 100
WAYS = ("wavefront at every call", "layers' paths at every call")


def implementations(layers, hidden):
    impls, _ = stacks.rows(layers, hidden, STEPS)
    stack = fastgru.GRUStack(fastgru.from_torch(stacks._torch_gru(layers, hidden)).layers)
    x = np.random.default_rng(1).standard_normal((1, STEPS, stacks.INPUT)).astype(np.float32)
    state = np.zeros((1, stack.state_size), np.float32)
    y = np.empty((1, 1, STEPS, hidden), np.float32)
    arrays = (x, state, None, NO_ROWS, None, y, state)
    for name, path in zip(WAYS, ("wave", "pair")):
        impls.append((name, lambda path=path: stack.run(1, STEPS, arrays, path=path)))
    return impls


def measure(rounds, calls):
    import torch

    torch.set_num_threads(THREADS)
    records = []
    n = max(5, calls // STEPS)
    for layers, hidden in SHAPES:
        med = stacks.time_blocks(implementations(layers, hidden), rounds, n)
        records.append((layers, hidden, med))
        print(f"{layers} x {hidden}: " + "  ".join(f"{name} {t:,.1f}" for name, t in med.items()), flush=True)
    return records, n


def markdown(records, machine, rounds, n):
    lines = [
        "| layers × hidden | fastgru's stack µs | wavefront at every call µs | layers' paths at every call µs "
        "| fastgru / the faster | one by one µs | ONNX Runtime µs | stack / ORT |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for layers, hidden, t in records:
        wave, paths = t[WAYS[0]], t[WAYS[1]]
        lines.append(
            f"| {layers} × {hidden} | {t['stack']:,.1f} | {wave:,.1f} | {paths:,.1f} "
            f"| {t['stack'] / min(wave, paths):.2f} | {t['one by one']:,.1f} | {t['ONNX Runtime']:,.1f} "
            f"| {t['stack'] / t['ONNX Runtime']:.2f} |"
        )
    lines += [
        "",
        f"{stacks.runtimes_line(machine)} in the same process; batch 1, input {stacks.INPUT}, {STEPS} steps, "
        f"float32, µs per call, medians of {rounds} rounds of {n} calls per implementation; OPENBLAS_CORETYPE "
        f"{machine['OPENBLAS_CORETYPE']}; {time.strftime('%Y-%m-%d')}.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=1000, help="steps per block: calls = calls // 100")
    parser.add_argument("--md", default=None)
    args = parser.parse_args(argv)
    records, n = measure(args.rounds, args.calls)
    show(markdown(records, machine_info(), args.rounds, n), args.md)


if __name__ == "__main__":
    main()
