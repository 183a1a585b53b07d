"""Consecutive GRU modules streamed frame by frame through ``fastgru.torch.optimize``: chained (one
kernel call per frame for both) beside the same modules called apart, one 2-layer torch.nn.GRU of
the same sizes, and torch.

    python benchmarks/torch_chains.py [--rounds 9] [--md PATH]

The model: ``y, h1 = gru1(x, h1); y, h2 = gru2(y, h2)``, input 128, hidden H each, batch 1,
``batch_first``, one frame (1, 1, 128) per call with the states carried, float32, under
``torch.inference_mode()``, torch's default threads. "apart" is a second optimized copy whose link
is refused (``fastgru.torch._LINKS``), so that its modules run one call each. Each round times every
way in turn for ``--frames`` frames; the table gives the medians of the rounds (µs per frame).
"""

import argparse
import statistics
import time

import torch
from conftest import compiled_line, run_conditions, show

import fastgru.torch
from fastgru import torch as fastgru_torch

HIDDEN = (64, 128, 256)
INPUTS = 128


class Two(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.gru1 = torch.nn.GRU(INPUTS, hidden, batch_first=True)
        self.gru2 = torch.nn.GRU(hidden, hidden, batch_first=True)

    def forward(self, x, h1, h2):
        y, h1 = self.gru1(x, h1)
        y, h2 = self.gru2(y, h2)
        return y, h1, h2


class One(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.gru = torch.nn.GRU(INPUTS, hidden, num_layers=2, batch_first=True)

    def forward(self, x, h1, h2):
        y, h = self.gru(x, torch.cat([h1, h2]))
        return y, h[:1], h[1:]


def _ways(hidden):
    torch.manual_seed(0)
    two = Two(hidden).eval()
    apart = fastgru.torch.optimize(two)
    fastgru_torch._LINKS[apart.gru1] = [None, 0]  # refused: one call per module
    return {
        "chained": fastgru.torch.optimize(two),
        "apart": apart,
        "2-layer GRU": fastgru.torch.optimize(One(hidden).eval()),
        "torch": two,
    }


def _round_us(model, hidden, frames):
    x = torch.randn(1, 1, INPUTS)
    h1 = h2 = torch.zeros(1, 1, hidden)
    for _ in range(5):  # plans, and the link
        _, h1, h2 = model(x, h1, h2)
    start = time.perf_counter()
    for _ in range(frames):
        _, h1, h2 = model(x, h1, h2)
    return (time.perf_counter() - start) / frames * 1e6


def measure(rounds, frames):
    rows = []
    for hidden in HIDDEN:
        ways = _ways(hidden)  # outside inference mode: the copies' Parameters are not inference tensors
        times = {way: [] for way in ways}
        with torch.inference_mode():
            for k in range(rounds):
                for way in ways if k % 2 == 0 else list(ways)[::-1]:
                    times[way].append(_round_us(ways[way], hidden, frames))
        medians = {way: statistics.median(t) for way, t in times.items()}
        rows.append((hidden, medians))
        print(hidden, {way: round(t, 1) for way, t in medians.items()}, flush=True)
    return rows


def markdown(rows, rounds, frames):
    lines = [
        "| hidden | chained µs | apart µs | chained / apart | one 2-layer GRU µs | torch µs |",
        "|---|---|---|---|---|---|",
    ]
    for hidden, m in rows:
        lines.append(
            f"| {hidden} | {m['chained']:,.1f} | {m['apart']:,.1f} | {m['chained'] / m['apart']:.2f} "
            f"| {m['2-layer GRU']:,.1f} | {m['torch']:,.1f} |"
        )
    lines += [
        "",
        f"{compiled_line()}; torch {torch.__version__} on {torch.get_num_threads()} threads; two GRUs, input "
        f"{INPUTS}, batch 1, one frame per call, float32; medians of {rounds} alternating rounds of {frames} "
        "frames in one process; " + run_conditions(),
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--frames", type=int, default=400)
    parser.add_argument("--md", default=None, help="write the table here too")
    args = parser.parse_args(argv)
    show(markdown(measure(args.rounds, args.frames), args.rounds, args.frames), args.md)


if __name__ == "__main__":
    main()
