"""A one-row cell against the cache roofline of its weights: how close a frame sits to its floor.

    python benchmarks/roofline.py [--md benchmarks/results/<cpu>/roofline_results.md]

The floor of a one-row call is the time to read its weights once. Its roofline here is what two
cores would take if each read its own half of the rows of [W R] from its own cache, with no
synchronisation: NumPy's sgemv of half of the 3H rows of the (3H, I + H) matrix, hot, on one thread
(a process of its own with ``OPENBLAS_NUM_THREADS=1``; the median of blocks of calls). Beside it,
fastgru's prepared GRUCell at batch 1, ``cell(x, h, out=h)`` on fastgru's threads (the default: the
partner thread takes half of a large enough row), float32, linear_before_reset, and the ratio
fastgru / roofline: at most 1 is on the floor. Shapes: input 256 and 512 × hidden 256 and 384
(1.6 to 4.1 MB of weights). Writes one markdown table. Run nothing else meanwhile.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

SHAPES = ((256, 256), (512, 256), (256, 384), (512, 384))


def _median_us(call, seconds=1.0, block=200):
    """The median over blocks of ``block`` calls, for about ``seconds``, of each block's mean."""
    for _ in range(block):
        call()
    means, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        for _ in range(block):
            call()
        means.append((time.perf_counter() - start) / block)
    return float(np.median(means)) * 1e6


def _weights(i, h, seed=0):
    rng = np.random.default_rng(seed)
    scale = 1 / np.sqrt(h)
    W, R = (rng.uniform(-scale, scale, (3 * h, k)).astype(np.float32) for k in (i, h))
    return W, R, rng.uniform(-scale, scale, 4 * h).astype(np.float32)


def _sgemv_half(i, h):
    """One thread's sgemv of half of the rows of [W R] (hot), in µs."""
    W, R, _ = _weights(i, h)
    half = np.ascontiguousarray(np.concatenate([W, R], axis=1)[: 3 * h // 2])
    v = np.random.default_rng(1).standard_normal(i + h).astype(np.float32)
    out = np.empty(half.shape[0], np.float32)
    return _median_us(lambda: np.dot(half, v, out=out))


def _roofline():
    """Every shape's one-thread sgemv, measured in a process whose BLAS runs on one thread."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, __file__, "--sgemv"], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _cell_us(i, h):
    import fastgru

    W, R, B = _weights(i, h)
    cell = fastgru.GRUCell(W, R, B, linear_before_reset=True)
    x = np.random.default_rng(1).standard_normal((1, i)).astype(np.float32)
    state = np.zeros((1, h), np.float32)
    return _median_us(lambda: cell(x, state, out=state))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--md", default=None, help="write the table here too")
    parser.add_argument("--sgemv", action="store_true", help=argparse.SUPPRESS)  # the roofline's own process
    args = parser.parse_args(argv)
    if args.sgemv:
        print(json.dumps([_sgemv_half(i, h) for i, h in SHAPES]))
        return
    import fastgru
    from fastgru import _isa

    roofline = _roofline()
    rows = []
    for (i, h), floor in zip(SHAPES, roofline):
        megabytes = 3 * h * (i + h) * 4 / 1e6
        cell = _cell_us(i, h)
        rows.append(f"| i{i} h{h} | {megabytes:.2f} | {floor:,.1f} | {cell:,.1f} | {cell / floor:.2f} |")
    text = "\n".join(
        [
            "| cell b1, lbr | weights MB | roofline µs (half the rows, 1 thread) | fastgru µs | fastgru / roofline |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"float32, medians of blocks of 200 calls; fastgru on {fastgru.get_num_threads()} threads, geometry "
            f"{_isa.GEOMETRY.name}, compiled for {_isa.TARGET_CPU}; NumPy {np.__version__}; OPENBLAS_CORETYPE "
            f"{os.environ.get('OPENBLAS_CORETYPE', 'unset')}; {time.strftime('%Y-%m-%d')}.",
            "",
        ]
    )
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
