"""``python -m fastgru info|bench``: what fastgru runs on here, and how fast."""

import argparse
import os
import platform
import sys
import time

import numpy as np

#: The quick latency table of ``bench``: (name, op, batch, steps, input_size, hidden_size, direction).
BENCH_SHAPES = [
    ("tiny", "gru_sequence", 1, 1, 4, 4, "forward"),
    ("cell-b1", "gru_cell", 1, 1, 256, 256, "forward"),
    ("cell-b64", "gru_cell", 64, 1, 256, 256, "forward"),
    ("seq-b1-h128", "gru_sequence", 1, 100, 64, 128, "forward"),
    ("seq-b1-h256", "gru_sequence", 1, 100, 64, 256, "forward"),
    ("seq-b1-h512", "gru_sequence", 1, 100, 64, 512, "forward"),
    ("seq-b16-bidi", "gru_sequence", 16, 50, 128, 256, "bidirectional"),
    ("seq-b64", "gru_sequence", 64, 100, 256, 256, "forward"),
    ("augru-b128", "augru_sequence", 128, 50, 36, 36, "forward"),
]


def info():
    """Versions, threads, SIMD level and cache folder, as ``name: value`` lines."""
    import llvmlite
    import llvmlite.binding as llvm
    import numba

    import fastgru

    from ._config import CACHE, CACHE_DIR, cache_root
    from ._isa import describe
    from ._partner import PARTNER, SPIN_US
    from ._threading import BUDGET, start_pool

    features = llvm.get_host_cpu_features()
    simd = next((name for name in ("avx512f", "avx2", "avx", "sse4.2", "neon", "asimd") if features.get(name)), "none")
    folder = cache_root()
    files = sum(name.endswith(".nbc") for _, _, names in os.walk(folder) for name in names) if folder else 0
    cache = (
        f"{folder} ({files} compiled kernels)"
        if folder
        else "none: no writable folder, kernels compile in every process"
        if CACHE
        else "off (FASTGRU_NO_CACHE)"
    )
    lines = {
        "fastgru": f"{fastgru.__version__} ({os.path.dirname(fastgru.__file__)})",
        "python": f"{platform.python_version()} ({sys.executable})",
        "numpy": np.__version__,
        "numba": f"{numba.__version__} (llvmlite {llvmlite.__version__})",
        "cpu": f"{llvm.get_host_cpu_name()}, {os.cpu_count()} logical cores",
        "simd": f"{simd.upper()} (this CPU's widest vector instructions)",
        "geometry": f"{describe()} (FASTGRU_ISA={os.environ.get('FASTGRU_ISA', '') or 'auto'})",
        "threads": f"{fastgru.get_num_threads()} for this thread; NUMBA_NUM_THREADS={BUDGET} for the process",
        "threading layer": start_pool(),
        "partner thread": (
            f"spins {SPIN_US} µs after its last job (FASTGRU_SPIN_US)"
            if PARTNER.enabled
            else "off (FASTGRU_SPIN_US=0, no JIT, or not an x86 CPU)"
        ),
        "cache folder": cache,
        "FASTGRU_CACHE_DIR": CACHE_DIR or "unset",
    }
    width = max(map(len, lines))
    return "\n".join(f"{name + ':':<{width + 1}} {value}" for name, value in lines.items())


def bench(seconds=0.2, dtype="float32"):
    """Median latency of fastgru's prepared ops and functions on BENCH_SHAPES, as a markdown table
    on standard output, with a progress bar on standard error."""
    import fastgru

    out, progress = sys.stdout, sys.stderr
    rows = []
    compile_start = time.perf_counter()
    fastgru.warmup(dtypes=[dtype])
    _progress(progress, 0, len(BENCH_SHAPES), f"kernels ready in {time.perf_counter() - compile_start:.1f} s")
    for k, shape in enumerate(BENCH_SHAPES):
        name, op, n, s, i, h, direction = shape
        prepared_op, prepared, function = _calls(np.random.default_rng(k), np.dtype(dtype), op, n, s, i, h, direction)
        flops = prepared_op._packed.flops(n, s)
        times = [_median(call, seconds / 2) for call in (prepared, function)]
        rows.append(
            f"| {name} | {n}-{s}-{i}-{h} | {times[0] * 1e6:,.1f} | {times[1] * 1e6:,.1f} | "
            f"{flops / times[0] / 1e9:.3g} |"
        )
        _progress(progress, k + 1, len(BENCH_SHAPES), name)
    print(f"fastgru {fastgru.__version__}, {dtype}, {fastgru.get_num_threads()} threads, median µs per call", file=out)
    print("| shape | batch-seq-input-hidden | prepared op (out=) | function | GFLOP/s (prepared) |", file=out)
    print("|---|---|---|---|---|", file=out)
    print("\n".join(rows), file=out)


def _calls(rng, dtype, op, n, s, i, h, direction):
    """The prepared op, a call of it with out= and a call of the function, on random inputs of the shape."""
    import fastgru

    d = 2 if direction == "bidirectional" else 1
    scale = 1 / np.sqrt(h)
    w = rng.uniform(-scale, scale, (d, 3 * h, i)).astype(dtype)
    r = rng.uniform(-scale, scale, (d, 3 * h, h)).astype(dtype)
    b = rng.uniform(-scale, scale, (d, 3 * h)).astype(dtype)
    x = rng.standard_normal((n, s, i)).astype(dtype)
    h0 = np.zeros((n, d, h), dtype)
    lengths = np.full(n, s)
    if op == "gru_cell":
        cell, x1, state = fastgru.GRUCell(w[0], r[0], b[0]), x[:, 0], h0[:, 0].copy()
        return cell, (lambda: cell(x1, state, out=state)), (lambda: fastgru.gru_cell(x1, state, w[0], r[0], b[0]))
    if op == "augru_sequence":
        a = rng.uniform(size=(n, s, 1)).astype(dtype)
        augru = fastgru.AUGRUSequence(w, r, b)
        outs = augru(x, h0, lengths, a)
        return (
            augru,
            (lambda: augru(x, h0, lengths, a, out=outs)),
            (lambda: fastgru.augru_sequence(x, h0, lengths, w, r, b, a)),
        )
    seq = fastgru.GRUSequence(w, r, b, direction=direction)
    outs = seq(x, h0, lengths)
    return (
        seq,
        (lambda: seq(x, h0, lengths, out=outs)),
        (lambda: fastgru.gru_sequence(x, h0, lengths, w, r, b, direction=direction)),
    )


def _median(call, seconds):
    """Median seconds of ``call`` over about ``seconds`` of calls, after two warm-up calls."""
    call()
    start = time.perf_counter()
    call()
    once = max(time.perf_counter() - start, 1e-7)
    times = []
    for _ in range(int(min(20000, max(5, seconds / once)))):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _progress(stream, done, total, label):
    """A one-line progress bar, redrawn in place on a terminal."""
    bar = "#" * (20 * done // total) + "." * (20 - 20 * done // total)
    end = "\n" if done == total or not stream.isatty() else ""
    stream.write(f"\r[{bar}] {done}/{total} {label:<40}{end}")
    stream.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fastgru", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help="versions, threading layer, SIMD level, cache folder")
    timing = commands.add_parser("bench", help="a quick latency table of fastgru on this machine")
    timing.add_argument("--seconds", type=float, default=0.2, help="timing budget per shape and call (default 0.2)")
    timing.add_argument("--dtype", default="float32", choices=["float16", "float32", "float64"])
    timing.add_argument("--threads", type=int, default=None, help="threads per call (default: all cores)")
    args = parser.parse_args(argv)
    if args.command == "info":
        print(info())
    else:
        import fastgru

        if args.threads is not None:
            fastgru.set_num_threads(args.threads)
        bench(args.seconds, args.dtype)
    return 0
