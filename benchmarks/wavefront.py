"""A stack of forward layers over a sequence at batch 1: the layer wavefront beside the path each
layer takes without it (the split of each row with the partner thread, or one thread).

    python benchmarks/wavefront.py [--rounds 7] [--md PATH]
    NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES="" FASTGRU_ISA=avx2 python benchmarks/wavefront.py   # AVX2 code

``fastgru.GRUStack`` of L layers, input 128, batch 1, 100 steps, float32, called as a user calls
it, in alternating rounds in one process: "wave" with ``_tuning.WAVE_MAX_BYTES`` unbounded and
``WAVE_RETRY`` 0, so that every call runs as a wavefront, "today" with it 0, so that none does, and
"fastgru" as fastgru runs it: a shape within the rule (each part's packed weights within one
core's L2) races the wavefront against the layers' paths (``_stack._Race``). The table gives the
medians of the rounds, the ratio of the first two, the path each ran, whether the rule admits the
wavefront for that shape, and fastgru's time over the faster of the other two.
"""

import argparse
import statistics
import time

import numpy as np
from conftest import compiled_line, run_conditions, show

import fastgru
from fastgru import _stack, _tuning

STACKS = ((2, 64), (2, 128), (2, 256), (2, 384), (2, 512), (3, 128), (3, 256), (4, 128))
INPUTS, STEPS = 128, 100


def _stack_of(n_layers, n_hidden):
    rng = np.random.default_rng(0)
    scale = 1 / np.sqrt(n_hidden)

    def layer(n_inputs):
        W = rng.uniform(-scale, scale, (1, 3 * n_hidden, n_inputs)).astype(np.float32)
        R = rng.uniform(-scale, scale, (1, 3 * n_hidden, n_hidden)).astype(np.float32)
        return fastgru.GRUSequence(W, R, rng.uniform(-scale, scale, (1, 3 * n_hidden)).astype(np.float32))

    return fastgru.GRUStack([layer(INPUTS)] + [layer(n_hidden) for _ in range(n_layers - 1)])


def _round_us(stack, limit, retry, n):
    """Microseconds per call of ``n`` calls with WAVE_MAX_BYTES = ``limit`` and WAVE_RETRY = ``retry``,
    and the paths the last untimed call ran."""
    _tuning.WAVE_MAX_BYTES, _tuning.WAVE_RETRY = limit, retry
    X = np.random.default_rng(1).standard_normal((1, STEPS, INPUTS)).astype(np.float32)
    h0 = np.zeros((1, stack.state_size), np.float32)
    y, ho = stack.result_shapes(1, STEPS)
    arrays = (X, h0, None, _stack.NO_ROWS, None, np.empty(y, np.float32), np.empty(ho, np.float32))
    for _ in range(3):  # the partner joins a burst from its third call
        ran = stack.run(1, STEPS, arrays)
    start = time.perf_counter()
    for _ in range(n):
        stack(X, h0, None)
    return (time.perf_counter() - start) / n * 1e6, ran[0]


def measure(rounds):
    rule, retry = _tuning.WAVE_MAX_BYTES, _tuning.WAVE_RETRY
    ways = {"wave": (1 << 62, 0), "today": (0, retry), "fastgru": (rule, retry)}
    rows = []
    try:
        for n_layers, n_hidden in STACKS:
            stack = _stack_of(n_layers, n_hidden)
            chosen = _stack._Layout(stack, 1, STEPS, 0).wave is not None
            n = max(5, 20_000_000 // (n_layers * n_hidden * n_hidden))
            times, paths = {way: [] for way in ways}, {}
            for k in range(rounds):
                for way in list(ways) if k % 2 == 0 else list(ways)[::-1]:
                    took, paths[way] = _round_us(stack, *ways[way], n)
                    times[way].append(took)
            wave, today, ours = (statistics.median(times[way]) for way in ways)
            rows.append((n_layers, n_hidden, wave, today, paths["wave"], paths["today"], chosen, ours))
            print(f"{n_layers} x {n_hidden}: wave {wave:.1f}, today {today:.1f} ({paths['today']}), fastgru {ours:.1f}")
            _tuning.WAVE_MAX_BYTES, _tuning.WAVE_RETRY = rule, retry
    finally:
        _tuning.WAVE_MAX_BYTES, _tuning.WAVE_RETRY = rule, retry
    return rows, rule


def markdown(rows, rule, rounds):
    lines = [
        "| layers × hidden | wavefront µs | without µs (path) | ratio | the rule admits the wavefront "
        "| fastgru µs | fastgru / the faster |",
        "|---|---|---|---|---|---|---|",
    ]
    for n_layers, n_hidden, wave, today, wave_path, today_path, chosen, ours in rows:
        lines.append(
            f"| {n_layers} × {n_hidden} | {wave:,.1f} ({wave_path}) | {today:,.1f} ({today_path}) "
            f"| {wave / today:.2f} | {'yes' if chosen else 'no'} | {ours:,.1f} | {ours / min(wave, today):.2f} |"
        )
    lines += [
        "",
        f"{compiled_line()}, one core's L2 "
        f"{rule // 1024} KiB; batch 1, input {INPUTS}, {STEPS} steps, float32, µs per call; medians of "
        f"{rounds} alternating rounds in one process; " + run_conditions(),
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--md", default=None, help="write the table here too")
    args = parser.parse_args(argv)
    rows, rule = measure(args.rounds)
    show(markdown(rows, rule, args.rounds), args.md)


if __name__ == "__main__":
    main()
