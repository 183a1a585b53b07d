"""Empty-cache start-up of two checkouts, in alternating fresh processes: ``fastgru.warmup()`` (its
defaults), the first float32 gru_sequence call (b4 s10 i16 h32 bidirectional), and the first three
calls of a one-row GRUCell of 256 units (the pair path: the full path, then its plan twice), and the
first function call of one row (``fastgru.gru_cell(x, h, W, R)``, 256 units), each from the
interpreter's start with a new, empty FASTGRU_CACHE_DIR.

    python benchmarks/cold_ab.py OLD_CHECKOUT NEW_CHECKOUT [--runs 2] [--md PATH]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CASES = {
    "warmup()": "import fastgru; fastgru.warmup()",
    "first gru_sequence call": (
        "import numpy as np, fastgru; r = np.random.default_rng(0); f = lambda *s: r.standard_normal(s, np.float32); "
        "fastgru.gru_sequence(f(4, 10, 16), f(4, 2, 32), np.full(4, 10), f(2, 96, 16), f(2, 96, 32), f(2, 96), "
        "direction='bidirectional')"
    ),
    "three calls of a one-row GRUCell, h256": (
        "import numpy as np, fastgru; r = np.random.default_rng(0); f = lambda *s: r.standard_normal(s, np.float32); "
        "cell = fastgru.GRUCell(f(768, 256) / 16, f(768, 256) / 16); x, h = f(1, 256), f(1, 256); "
        "[cell(x, h) for _ in range(3)]"
    ),
    "first function call of one row, gru_cell h256": (
        "import numpy as np, fastgru; r = np.random.default_rng(0); f = lambda *s: r.standard_normal(s, np.float32); "
        "fastgru.gru_cell(f(1, 256), f(1, 256), f(768, 256) / 16, f(768, 256) / 16)"
    ),
}


def _seconds(checkout, code):
    """Seconds of ``code`` in a fresh process that imports ``checkout``'s fastgru. The process runs in
    the empty cache folder: ``python -c`` puts its working folder first on the path, and from a
    checkout's root that folder's fastgru would win over PYTHONPATH's (as it did before this was
    checked: both sides then ran the same code)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": checkout, "FASTGRU_CACHE_DIR": cache}
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", code + "; print(fastgru.__file__)"],
            env=env,
            cwd=cache,
            check=True,
            capture_output=True,
            text=True,
        )
        took = time.perf_counter() - start
    imported = Path(done.stdout.split()[-1]).resolve()
    if Path(checkout).resolve() not in imported.parents:
        raise RuntimeError(f"the process for {checkout} imported {imported}")
    return took


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--md")
    args = parser.parse_args(argv)
    lines = ["| empty cache | old s | new s | new / old |", "|---|---|---|---|"]
    for name, code in _CASES.items():
        times = {"old": [], "new": []}
        for k in range(args.runs):
            for which in ("old", "new") if k % 2 == 0 else ("new", "old"):
                times[which].append(_seconds(getattr(args, which), code))
        old, new = statistics.median(times["old"]), statistics.median(times["new"])
        lines.append(f"| {name} | {old:.1f} | {new:.1f} | {new / old:.3f} |")
        print(lines[-1], times, flush=True)
    text = "\n".join(lines) + f"\n\nold: {args.old}; new: {args.new}; medians of {args.runs} fresh processes each.\n"
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
