"""What ONNX Runtime's spinning workers cost fastgru's one-row cell when both run in one process.

    python benchmarks/peer_spinning.py [--processes 4] [--rounds 15]
                                       [--md benchmarks/results/<cpu>/peer_spinning_results.md]

The hidden-size-256 row of ``small_calls.py`` (GRUCell b1 i256 h256, float32, ``cell(x, h, out=h)``
against ONNX Runtime's GRU node with IOBinding, 2 threads each), in fresh processes whose ONNX
Runtime session lets its intra-op workers spin between calls (ONNX Runtime's default,
``session.intra_op.allow_spinning`` 1) or not (0); the two settings alternate process by process.
Each process times, round after round, a block of ``--calls`` calls of fastgru's cell right after a
block of ONNX Runtime's calls, a block of ONNX Runtime's, and a block of fastgru's right after a block
of its own; a process's figure is the median of its rounds' per-call means. The table gives, per
setting, the median over the processes and their range.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

COLUMNS = {
    "after_peer": "fastgru µs, after ONNX Runtime's block",
    "after_own": "fastgru µs, after its own block",
    "peer": "ONNX Runtime µs",
}


def child(spinning, rounds, calls):
    """One process's medians (COLUMNS' keys), as a line of JSON."""
    import conftest  # noqa: F401  (imports openvino first, as small_calls.py does: Numba then picks TBB)
    import numpy as np
    import peers
    from peers import Case, Shape, onnxruntime_gru

    import fastgru

    peers.ORT_SPINNING = spinning
    c = Case(Shape("gru_cell", 1, 1, 256, 256))
    cell = fastgru.GRUCell(c.W[0], c.R[0], c.B[0])
    x, h = np.ascontiguousarray(c.X[:, 0]), np.ascontiguousarray(c.H0[:, 0])
    peer, _ = onnxruntime_gru(c)

    def ours():
        cell(x, h, out=h)

    def per_call_us(call):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        return (time.perf_counter_ns() - start) / calls / 1000

    for _ in range(300):
        ours()
        peer()
    found = {key: [] for key in COLUMNS}
    for _ in range(rounds):
        found["peer"].append(per_call_us(peer))
        found["after_peer"].append(per_call_us(ours))
        found["after_own"].append(per_call_us(ours))
    print(json.dumps({key: statistics.median(values) for key, values in found.items()}))


def markdown(results, machine, args):
    from conftest import peer_line

    lines = [
        "| ONNX Runtime's workers | processes | " + " | ".join(COLUMNS.values()) + " |",
        "|---|---|" + "---|" * len(COLUMNS),
    ]
    for spinning in (True, False):
        runs = results[str(spinning)]
        cells = []
        for key in COLUMNS:
            values = [run[key] for run in runs]
            cells.append(f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})")
        label = "spin between calls (default)" if spinning else "do not spin (allow_spinning 0)"
        lines.append(f"| {label} | {len(runs)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"{peer_line(machine)}; GRUCell b1 i256 h256 float32 `cell(x, h, out=h)`; medians of "
        f"{args.rounds} rounds of {args.calls} calls per process, then the median (min-max) over the processes; "
        f"OPENBLAS_CORETYPE {machine['OPENBLAS_CORETYPE']}; {time.strftime('%Y-%m-%d')}.",
        "",
        f"`python benchmarks/peer_spinning.py --processes {args.processes} --rounds {args.rounds} "
        f"--calls {args.calls}`",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=4, help="fresh processes per setting")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--md", default=None)
    parser.add_argument("--child", choices=["1", "0"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child == "1", args.rounds, args.calls)
        return
    results = {"True": [], "False": []}
    for k in range(2 * args.processes):
        spinning = k % 2 == 0
        command = [sys.executable, __file__, "--child", "1" if spinning else "0"]
        command += ["--rounds", str(args.rounds), "--calls", str(args.calls)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        run = json.loads(done.stdout.strip().splitlines()[-1])
        results[str(spinning)].append(run)
        print(spinning, {key: round(value, 2) for key, value in run.items()}, flush=True)
    import onnxruntime  # noqa: F401  (machine_info names the versions of the peers imported)
    from conftest import machine_info, show  # after the children: it imports openvino and fastgru

    show(markdown(results, machine_info(), args), args.md)


if __name__ == "__main__":
    main()
