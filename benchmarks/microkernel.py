"""The micro-kernel's efficiency: fastgru on one thread against NumPy's single-thread sgemm, in one process.

fastgru runs GRUSequence b64 s100 i256 h256 (float32, prepared op with out=, one thread); NumPy
multiplies matrices of the same products' sizes (X·Wᵀ as one (6400 x 256) @ (256 x 768), and the
recurrence's (64 x 256) @ (256 x 768), 100 times) with its BLAS on one thread. Both GFLOP/s count
2·B·T·3H·(I + H) flops. Run it once per geometry:

    python benchmarks/microkernel.py                                                 # this CPU's geometry
    FASTGRU_ISA=avx2 NUMBA_CPU_NAME=znver3 NUMBA_CPU_FEATURES="" python benchmarks/microkernel.py
    FASTGRU_ISA=generic python benchmarks/microkernel.py

It prints one line of markdown: geometry, target CPU, fastgru's and NumPy's GFLOP/s (medians of
interleaved rounds; NumPy's with its OPENBLAS_CORETYPE, which picks OpenBLAS's kernels: e.g.
Haswell for AVX2, Nehalem for SSE only) and their ratio. ``--json FILE`` appends the record to a JSON list.
"""

import argparse
import json
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads its BLAS
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import fastgru  # noqa: E402
from fastgru import _isa  # noqa: E402

N, S, I, H = 64, 100, 256, 256
FLOPS = 2 * N * S * 3 * H * (I + H)


def _median_seconds(call, seconds):
    call()
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0, help="per implementation and round")
    parser.add_argument("--json", help="append the record to this JSON file")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    scale = 1 / np.sqrt(H)
    W = rng.uniform(-scale, scale, (1, 3 * H, I)).astype(np.float32)
    R = rng.uniform(-scale, scale, (1, 3 * H, H)).astype(np.float32)
    B = rng.uniform(-scale, scale, (1, 3 * H)).astype(np.float32)
    X = rng.standard_normal((N, S, I)).astype(np.float32)
    h0 = np.zeros((N, 1, H), np.float32)
    lengths = np.full(N, S, np.int32)
    op = fastgru.GRUSequence(W, R, B)
    out = op(X, h0, lengths)

    Xf, Wt, Rt = X.reshape(N * S, I), np.ascontiguousarray(W[0].T), np.ascontiguousarray(R[0].T)
    state = np.zeros((N, H), np.float32)
    products = np.empty((N * S, 3 * H), np.float32)
    recurrent = np.empty((N, 3 * H), np.float32)

    def numpy_products():
        np.matmul(Xf, Wt, out=products)
        for _ in range(S):
            np.matmul(state, Rt, out=recurrent)

    def fastgru_call():
        op(X, h0, lengths, out=out)

    results = {"fastgru": [], "numpy": []}
    with fastgru.threads(1):
        for _ in range(args.rounds):
            results["fastgru"].append(_median_seconds(fastgru_call, args.seconds))
            results["numpy"].append(_median_seconds(numpy_products, args.seconds))
    gflops = {name: FLOPS / float(np.median(times)) / 1e9 for name, times in results.items()}
    record = {
        "geometry": _isa.GEOMETRY.name,
        "target": _isa.TARGET_CPU,
        "host": _isa.llvm.get_host_cpu_name(),
        "fastgru_gflops": round(gflops["fastgru"], 1),
        "numpy_gflops": round(gflops["numpy"], 1),
        "ratio": round(gflops["fastgru"] / gflops["numpy"], 3),
        "numpy": np.__version__,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "unset"),
    }
    print(
        f"| {record['geometry']} | {record['target']} on {record['host']} | {record['fastgru_gflops']} | "
        f"{record['numpy_gflops']} ({record['OPENBLAS_CORETYPE']}) | {record['ratio']:.2f} |"
    )
    if args.json:
        data = json.load(open(args.json)) if os.path.exists(args.json) else []
        data.append(record)
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
    return record


if __name__ == "__main__":
    main()
