"""Whether a one-row call after a pause should wake the sleeping partner thread first: the
measurement behind ``_tuning.PAIR_WAKE_FLOPS`` (docs/tuning.md, "Tuning: the partner thread").

    python benchmarks/partner_wake.py [--md benchmarks/results/<cpu>/partner_wake_results.md]

GRUSequence b1 s100 i64 lbr1 float32 for several hidden sizes, prepared op with ``out=``, 40 calls
each after a pause of 2-20 ms (one seed), the partner asleep at each call: once with
PAIR_WAKE_FLOPS at 0 (every call wakes it first), once far above the call (every call runs
alone), the two alternated over 3 rounds; medians of the rounds' medians.
"""

import argparse
import time

import numpy as np

import fastgru
from fastgru import _isa, _tuning

N, S, I = 1, 100, 64
HIDDEN = (256, 320, 384, 512, 1024)


def _op(h):
    rng = np.random.default_rng(0)
    scale = 1 / np.sqrt(h)
    W = rng.uniform(-scale, scale, (1, 3 * h, I)).astype(np.float32)
    R = rng.uniform(-scale, scale, (1, 3 * h, h)).astype(np.float32)
    B = rng.uniform(-scale, scale, (1, 4 * h)).astype(np.float32)
    op = fastgru.GRUSequence(W, R, B, linear_before_reset=True)
    X = rng.standard_normal((N, S, I)).astype(np.float32)
    h0, lengths = np.zeros((N, 1, h), np.float32), np.full(N, S, np.int32)
    out = (np.empty((N, 1, S, h), np.float32), np.empty((N, 1, h), np.float32))
    return op, lambda: op(X, h0, lengths, out=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--md", default=None, help="write the table here too")
    args = parser.parse_args(argv)
    pauses = np.random.default_rng(1).uniform(0.002, 0.02, 40)
    rows = []
    for h in HIDDEN:
        op, call = _op(h)
        for _ in range(20):
            call()
        medians = {"wake": [], "alone": []}
        for _ in range(3):
            for mode, threshold in (("wake", 0), ("alone", 10**15)):
                _tuning.PAIR_WAKE_FLOPS = threshold
                times = []
                for pause in pauses:
                    time.sleep(pause)
                    start = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - start)
                medians[mode].append(np.median(times) * 1e6)
        wake, alone = (float(np.median(medians[m])) for m in ("wake", "alone"))
        mflop = op._packed.flops(N, S) / 1e6
        rows.append(f"| {h} | {mflop:.0f} | {wake:,.0f} | {alone:,.0f} | {wake / alone:.2f} |")
    text = "\n".join(
        [
            "| hidden_size | MFLOP | wake the partner first, µs | run alone, µs | wake / alone |",
            "|---|---|---|---|---|",
            *rows,
            "",
            f"GRUSequence b{N} s{S} i{I} lbr1 float32, calls after 2-20 ms pauses; medians. Geometry "
            f"{_isa.GEOMETRY.name}, compiled for {_isa.TARGET_CPU}; fastgru threads {fastgru.get_num_threads()}.",
            "",
        ]
    )
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
