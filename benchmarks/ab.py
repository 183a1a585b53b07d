"""Time one benchmark shape of the prepared op (called with out=) in this process; print the median µs.

For A/B comparisons of two checkouts, run it alternately with each on the path, one process at a
time, and compare the medians of the processes' medians, e.g.::

    for i in 1 2 3 4 5 6; do
        PYTHONPATH=/path/to/old python benchmarks/ab.py augru-b128-s50-i36-h36-lbr0
        PYTHONPATH=/path/to/new python benchmarks/ab.py augru-b128-s50-i36-h36-lbr0
    done

The shape is an id of bench_gru.SHAPES. Like the benchmark session, it imports OpenVINO first when
it is installed, so that Numba picks the same threading layer (TBB), and runs on 2 threads.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

try:
    import openvino  # noqa: F401
except ImportError:
    pass

import numba  # noqa: E402
from peers import Case, fastgru_prepared  # noqa: E402

import fastgru  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shape", help="a shape id of benchmarks/bench_gru.py, e.g. seq-b128-s50-i36-h36-lbr0")
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds after the warm-up (default 2)")
    parser.add_argument("--threads", type=int, default=2, help="Numba threads (default 2)")
    parser.add_argument("--weight-dtype", default=None, help="bfloat16 or int8: compact weights (default: exact)")
    args = parser.parse_args()
    from bench_gru import SHAPES

    shapes = {s.id: s for s in SHAPES}
    if args.shape not in shapes:
        parser.error(f"unknown shape {args.shape!r}; one of {', '.join(shapes)}")
    numba.set_num_threads(args.threads)
    run, _ = fastgru_prepared(Case(shapes[args.shape]), args.weight_dtype)
    warm_until = time.perf_counter() + 0.3
    while time.perf_counter() < warm_until:  # compilation (or the cache), first touch, the partner thread
        run()
    times = []
    stop = time.perf_counter() + args.seconds
    while time.perf_counter() < stop:
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    print(
        f"{statistics.median(times) * 1e6:.1f} µs median of {len(times)} calls, {args.shape}"
        f"{', ' + args.weight_dtype + ' weights' if args.weight_dtype else ''}, "
        f"fastgru at {Path(fastgru.__file__).parent.parent}, {numba.threading_layer()}"
    )


if __name__ == "__main__":
    main()
