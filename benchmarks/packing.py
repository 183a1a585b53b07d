"""What packing the weights costs, before and after a change: prepared-op construction and the
function API, in alternating fresh processes of two checkouts.

    python benchmarks/packing.py OLD_CHECKOUT NEW_CHECKOUT [--pairs 3] [--md PATH]
    python benchmarks/packing.py --one          # this process's fastgru: one JSON line

Per hidden size H (inputs I = H, float32, batch 1): ``fastgru.GRUCell(W, R, B)`` (packing), the
function API ``fastgru.gru_cell(x, h, W, R, B)`` with the same arrays at every call (the kept
packed weights, checked against the caller's), and with other weights at every call (ten sets in
turn, more than the function API keeps: each call packs). Each process times every case in
rounds, and reports the median of its rounds; the table gives the median over the processes and
NEW / OLD. Each process runs this file with the checkout's fastgru on the path.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HIDDEN = (64, 256, 512)
CASES = ("GRUCell(W, R, B)", "gru_cell, the same weights", "gru_cell, other weights each call")


def _median_us(call, calls, rounds=9):
    call()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def _cases(fastgru, rng, h):
    """(case, call, calls) of hidden size h."""
    x, h0 = rng.standard_normal((1, h), np.float32), np.zeros((1, h), np.float32)
    sets = [
        tuple(
            rng.standard_normal(shape, np.float32) * np.float32(h**-0.5) for shape in ((3 * h, h), (3 * h, h), (3 * h,))
        )
        for _ in range(10)
    ]
    turn = iter(range(10**9))
    calls = max(5, 2_000_000 // (h * h))
    return (
        (CASES[0], lambda: fastgru.GRUCell(*sets[0]), calls),
        (CASES[1], lambda: fastgru.gru_cell(x, h0, *sets[0]), 4 * calls),
        (CASES[2], lambda: fastgru.gru_cell(x, h0, *sets[next(turn) % 10]), calls),
    )


def one():
    """{case: {H: µs}} for this process's fastgru."""
    import fastgru

    rng = np.random.default_rng(0)
    results = {case: {} for case in CASES}
    for h in HIDDEN:
        for case, call, calls in _cases(fastgru, rng, h):
            results[case][h] = _median_us(call, calls)
    return results


def _process(checkout):
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, __file__, "--one"], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _commit(checkout):
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or str(checkout)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", nargs="?")
    parser.add_argument("new", nargs="?")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--md", default=None)
    parser.add_argument("--one", action="store_true", help="time this process's fastgru, print one JSON line")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one()))
        return
    runs = {"old": [], "new": []}
    for k in range(args.pairs):
        for side in ("old", "new") if k % 2 == 0 else ("new", "old"):
            runs[side].append(_process(getattr(args, side)))
            print(side, runs[side][-1], flush=True)
    lines = ["| case | H | before µs | after µs | after / before |", "|---|---|---|---|---|"]
    for case in CASES:
        for h in HIDDEN:
            old, new = (statistics.median(r[case][str(h)] for r in runs[side]) for side in ("old", "new"))
            lines.append(f"| {case} | {h} | {old:,.1f} | {new:,.1f} | {new / old:.2f} |")
    from conftest import compiled_line, show

    lines += [
        "",
        f"{compiled_line()}; "
        "float32, batch 1, inputs = H; "
        f"medians over {args.pairs} fresh processes per checkout, alternating, of each process's median of 9 rounds; "
        f"before {_commit(args.old)}, after {_commit(args.new)}; "
        f"OPENBLAS_CORETYPE {os.environ.get('OPENBLAS_CORETYPE', 'unset')}; "
        f"{time.strftime('%Y-%m-%d')}.",
        "",
    ]
    text = "\n".join(lines)
    show(text, args.md)


if __name__ == "__main__":
    main()
