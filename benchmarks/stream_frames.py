"""A stream's frame against the same frame as a plain call, in one process: what a stream adds.

    PYTHONPATH=CHECKOUT python benchmarks/stream_frames.py [--rounds 30] [--md FILE]

A torch.nn.GRU of 2 layers (input 128, hidden 256, batch first) imported by ``fastgru.from_torch``,
at batch 1, one step per call, float32, its state carried: the ``GRUStack`` of its layers called
with ``out=(Y, state)``; ``stack.stream(state)`` fed with ``out=``; the imported GRU's
``TorchGRU.stream`` fed with ``out=``; and its first layer alone, called with ``out=`` and as
``op.stream``. Blocks of 200 calls of each in turn, ``--rounds`` times; the median of each one's
block means, µs per frame, and each stream's excess over its plain call (one process: the pair
road's processes differ by more than that, so compare the excess between checkouts). Prints a
markdown table; ``--md FILE`` appends it with the machine.
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


def impls():
    """(name, call) of each way of running one frame."""
    import torch

    torch.manual_seed(0)
    gru = torch.nn.GRU(128, 256, num_layers=2, batch_first=True)
    imported = fastgru.from_torch(gru)
    stack = fastgru.GRUStack(imported.layers)
    op = imported.layers[0]
    x = np.random.default_rng(0).standard_normal((1, 1, 128)).astype(np.float32)
    state = np.zeros((1, stack.state_size), np.float32)
    y = np.empty((1, 1, 1, 256), np.float32)
    y3 = np.empty((1, 1, 256), np.float32)
    h, ho = np.zeros((1, 1, 256), np.float32), np.empty((1, 1, 256), np.float32)
    stack_stream = stack.stream(state.copy())
    torch_stream = imported.stream(torch.zeros(2, 1, 256))
    op_stream = op.stream(h.copy())
    return [
        ("stack call", lambda: stack(x, state, None, out=(y, state))),
        ("stack.stream", lambda: stack_stream(x, out=y)),
        ("TorchGRU.stream", lambda: torch_stream(x, out=y3)),
        ("layer call", lambda: op(x, h, None, out=(y, ho))),
        ("layer stream", lambda: op_stream(x, out=y)),
    ]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--md", default=None)
    args = parser.parse_args(argv)
    calls = impls()
    for _, call in calls:
        for _ in range(2000):
            call()
    times = {name: [] for name, _ in calls}
    for _ in range(args.rounds):
        for name, call in calls:
            start = time.perf_counter_ns()
            for _ in range(200):
                call()
            times[name].append((time.perf_counter_ns() - start) / 200 / 1000)
    us = {name: statistics.median(values) for name, values in times.items()}
    plain = {"stack.stream": "stack call", "TorchGRU.stream": "stack call", "layer stream": "layer call"}
    lines = ["| frame | µs | over its plain call, µs |", "|---|---|---|"]
    for name, value in us.items():
        over = f"{value - us[plain[name]]:.2f}" if name in plain else "-"
        lines.append(f"| {name} | {value:.2f} | {over} |")
    text = "\n".join(lines)
    print(text)
    if args.md:
        with open(args.md, "a") as f:
            f.write(f"{text}\n\n{fastgru.__file__}; {machine_info()}\n\n")


if __name__ == "__main__":
    main()
