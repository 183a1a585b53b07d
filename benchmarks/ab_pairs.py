"""A/B of two checkouts over benchmark shapes: ``ab.py`` run in alternating processes, one at a time.

    python benchmarks/ab_pairs.py OLD_CHECKOUT NEW_CHECKOUT [--shapes ID ...] [--pairs 5]
                                  [--seconds 1.5] [--md benchmarks/ab/<cpu>/ab_results.md]
                                  [--weight-dtype bfloat16|int8]

For each shape (default: every shape of ``bench_gru.SHAPES``), ``--pairs`` times: a process with
OLD's fastgru on the path, then one with NEW's (the order alternates from pair to pair), each
timing the prepared op with ``out=`` for ``--seconds`` after its warm-up (``ab.py``). The table
gives the median over the processes of their medians, and NEW / OLD. Each process runs its own
checkout's ``benchmarks/ab.py`` and fastgru (the shapes' ids and data are the same in both).

Before the pairs, one untimed process per checkout fills its cache: a process that compiles can
time calls that still compile (a median of seconds). One process's median is not the checkout's:
on a shared host the processes of the same code spread by 10-15% and more (allocations land at
other addresses, other cores' load), so the table adds a 95% interval of NEW / OLD, by bootstrap
over the processes' medians; an interval that holds 1 has not shown a difference.
"""

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _median_us(checkout, shape, seconds, weight_dtype=None):
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    # With compact weights both sides run this checkout's ab.py (older ones may lack the option).
    script = HERE / "ab.py" if weight_dtype else Path(checkout) / "benchmarks" / "ab.py"
    extra = ["--weight-dtype", weight_dtype] if weight_dtype else []
    out = subprocess.run(
        [sys.executable, str(script), shape, "--seconds", str(seconds), *extra],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(re.match(r"([\d.]+) µs", out).group(1))


def ratio_interval(old, new, draws=4000, seed=0):
    """The 2.5th and 97.5th percentiles of median(new) / median(old) over bootstrap resamples of
    both lists (each process's median one value)."""
    rng = random.Random(seed)
    ratios = sorted(
        statistics.median(rng.choices(new, k=len(new))) / statistics.median(rng.choices(old, k=len(old)))
        for _ in range(draws)
    )
    return ratios[int(0.025 * draws)], ratios[int(0.975 * draws) - 1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--shapes", nargs="*")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--md", default=None)
    parser.add_argument("--weight-dtype", default=None, help="bfloat16 or int8: compact weights on both sides")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from bench_gru import SHAPES

    shapes = args.shapes or [s.id for s in SHAPES]
    lines = ["| shape | old µs | new µs | new / old | 95% interval |", "|---|---|---|---|---|"]
    for shape in shapes:
        for which in ("old", "new"):  # fill each checkout's cache, untimed
            _median_us(getattr(args, which), shape, 0.1, args.weight_dtype)
        times = {"old": [], "new": []}
        for k in range(args.pairs):
            order = ("old", "new") if k % 2 == 0 else ("new", "old")
            for which in order:
                times[which].append(_median_us(getattr(args, which), shape, args.seconds, args.weight_dtype))
        old, new = statistics.median(times["old"]), statistics.median(times["new"])
        low, high = ratio_interval(times["old"], times["new"])
        lines.append(f"| {shape} | {old:,.1f} | {new:,.1f} | {new / old:.3f} | {low:.3f}-{high:.3f} |")
        print(lines[-1], flush=True)
    from conftest import compiled_line, show

    lines += [
        "",
        f"old: {args.old}; new: {args.new}. Prepared op with out=, "
        f"{args.weight_dtype + ' weights, ' if args.weight_dtype else ''}2 threads, medians of {args.pairs} processes "
        f"each ({args.seconds} s of calls after a warm-up), alternating, after one untimed process each; "
        f"the interval by bootstrap over the processes' medians; {compiled_line()}; "
        f"{time.strftime('%Y-%m-%d')}.",
        "",
    ]
    show("\n".join(lines), args.md)


if __name__ == "__main__":
    main()
