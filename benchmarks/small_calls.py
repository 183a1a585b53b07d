"""The small-call table: the calls a low-latency server makes most, fastgru beside ONNX Runtime.

    python benchmarks/small_calls.py [--rounds 15] [--json benchmarks/results/<cpu>/small_calls_results.json]
                                     [--md benchmarks/results/<cpu>/small_calls_results.md] [--readme FILE]

Rows (float32, 2 threads for both, everything in one process, warm):

- GRUCell i4 h4 ``cell(x, h, out=h)`` and GRUSequence b1 s1 i4 h4 with ``out=``, against ONNX
  Runtime's GRU node with IOBinding (inputs bound once, outputs preallocated);
- GRUCell b1 i256 h256 ``cell(x, h, out=h)``, back to back and spaced (a call after each pause of
  2-20 ms), against the same;
- ``fastgru.gru_cell(x, h, W, R, B)`` b1 i256 h256 with the same arrays at every call, against the
  prepared cell (``cell(x, h)``).

Back-to-back rows: each round times ``--calls`` calls of each implementation in turn (the order
alternates), and the row gives the median of the rounds' per-call means. Spaced rows: one call
after each pause, the implementations alternating, 60 pauses each; the median. Writes JSON (the
records and the machine) and a markdown table, which ``--readme`` also puts between the markers
``<!-- small-calls:start -->`` and ``<!-- small-calls:end -->`` of FILE.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import machine_info, peer_line  # noqa: E402  (also imports openvino first: Numba then picks TBB)
from peers import Case, Shape, onnxruntime_gru  # noqa: E402
from report import replace_table  # noqa: E402

import fastgru  # noqa: E402


def _cell(shape):
    c = Case(shape)
    cell = fastgru.GRUCell(c.W[0], c.R[0], c.B[0], linear_before_reset=shape.lbr)
    x, h = np.ascontiguousarray(c.X[:, 0]), np.ascontiguousarray(c.H0[:, 0])
    return c, cell, x, h


def rows():
    """(name, fastgru's call, the peer's name, the peer's call, spaced) of each row."""
    tiny_cell = Shape("gru_cell", 1, 1, 4, 4)
    c, cell4, x4, h4 = _cell(tiny_cell)
    seq_shape = Shape("gru_sequence", 1, 1, 4, 4)
    cs = Case(seq_shape)
    seq = fastgru.GRUSequence(cs.W, cs.R, cs.B)
    seq_out = (np.empty((1, 1, 1, 4), np.float32), np.empty((1, 1, 4), np.float32))
    big = Shape("gru_cell", 1, 1, 256, 256)
    cb, cell256, x256, h256 = _cell(big)
    h256_fn = h256.copy()
    W, R, B = cb.W[0], cb.R[0], cb.B[0]
    # (run, result) kept together: result holds the arrays ONNX Runtime reads and writes
    ort_tiny, ort_seq, ort_big = onnxruntime_gru(c), onnxruntime_gru(cs), onnxruntime_gru(cb)
    keep = (ort_tiny, ort_seq, ort_big)
    return keep, [
        ("GRUCell i4 h4 cell(x, h, out=h)", lambda: cell4(x4, h4, out=h4), "ONNX Runtime", ort_tiny[0], False),
        (
            "GRUSequence b1 s1 i4 h4 out=",
            lambda: seq(cs.X, cs.H0, cs.lengths, out=seq_out),
            "ONNX Runtime",
            ort_seq[0],
            False,
        ),
        (
            "GRUCell b1 i256 h256 cell(x, h, out=h)",
            lambda: cell256(x256, h256, out=h256),
            "ONNX Runtime",
            ort_big[0],
            False,
        ),
        ("the same, spaced (2-20 ms apart)", lambda: cell256(x256, h256, out=h256), "ONNX Runtime", ort_big[0], True),
        (
            "fastgru.gru_cell(x, h, W, R, B) b1 i256 h256",
            lambda: fastgru.gru_cell(x256, h256_fn, W, R, B),
            "prepared cell(x, h)",
            lambda: cell256(x256, h256_fn),
            False,
        ),
    ]


def _per_call_us(call, n):
    start = time.perf_counter_ns()
    for _ in range(n):
        call()
    return (time.perf_counter_ns() - start) / n / 1000


def _once_us(call):
    start = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - start) / 1000


def measure(rounds, calls, pauses):
    records = []
    keep, table = rows()
    for name, ours, peer_name, peer, spaced in table:
        for _ in range(200 if not spaced else 20):
            ours()
            peer()
        mine, theirs = [], []
        if spaced:
            gaps = np.random.default_rng(1).uniform(0.002, 0.02, pauses)
            for k, gap in enumerate(gaps):
                for first in (ours, peer) if k % 2 == 0 else (peer, ours):
                    time.sleep(gap / 2)
                    (mine if first is ours else theirs).append(_once_us(first))
        else:
            for k in range(rounds):
                for first in (ours, peer) if k % 2 == 0 else (peer, ours):
                    (mine if first is ours else theirs).append(_per_call_us(first, calls))
        a, b = statistics.median(mine), statistics.median(theirs)
        records.append({"call": name, "fastgru_us": a, "peer": peer_name, "peer_us": b, "ratio": a / b})
        print(f"{name:48s} {a:9.2f} us  {peer_name} {b:9.2f} us  ratio {a / b:.2f}", flush=True)
    return records


def markdown(records, machine):
    lines = ["| call | fastgru µs | peer | peer µs | ratio |", "|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['call']} | {r['fastgru_us']:,.2f} | {r['peer']} | {r['peer_us']:,.2f} | {r['ratio']:.2f} |")
    lines += [
        "",
        f"{peer_line(machine)}; float32, medians; OPENBLAS_CORETYPE {machine['OPENBLAS_CORETYPE']}, FASTGRU_SPIN_US "
        f"{os.environ.get('FASTGRU_SPIN_US', 'unset (1000)')}; {machine['date']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000, help="calls per round of a back-to-back row")
    parser.add_argument("--pauses", type=int, default=60)
    parser.add_argument("--json", default=None)
    parser.add_argument("--md", default=None)
    parser.add_argument("--readme", default=None, help="put the table between this file's small-calls markers")
    args = parser.parse_args(argv)
    records = measure(args.rounds, args.calls, args.pauses)
    machine = {**machine_info(), "date": time.strftime("%Y-%m-%d")}
    text = markdown(records, machine)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "records": records}, indent=1) + "\n")
    if args.md:
        Path(args.md).write_text(text)
    if args.readme:
        replace_table(args.readme, "small-calls", text)


if __name__ == "__main__":
    main()
