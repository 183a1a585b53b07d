"""fastgru against OpenVINO, ONNX Runtime, torch and the NumPy reference, side by side.

Run: see benchmarks/README.md. Each (shape, implementation, round) is one pytest-benchmark test;
all implementations of a shape run one after the other in the same process, with their set-up
(model compilation, weight packing, Numba compilation) and one warm-up call outside the timer.
``bench_gru`` times calls back to back; ``bench_gru_spaced`` times calls spaced by pauses, as a
server sees requests, for a few shapes.
"""

import time

import numpy as np
import pytest
from conftest import machine_info
from peers import IMPLS, Case, Shape, Unavailable

from fastgru.benchmark import SUITES, TOLERANCES

#: Every shape of fastgru's named suites (``python -m fastgru bench --list-suites``), so that the
#: README's tables and ``python -m fastgru bench`` name the same shapes; SUITE_OF names each one's suite.
SHAPES = [shape for shapes in SUITES.values() for shape in shapes]
SUITE_OF = {shape.id: name for name, shapes in SUITES.items() for shape in shapes}

#: Seconds of timed calls per (shape, implementation, round), in calls of one run each.
BUDGET = 0.1

#: Rounds: every (shape, implementation) is timed once per round, and conftest.py orders the
#: tests round by round, so that a slow spell of this shared machine hits all implementations
#: alike; report.py takes the median of the rounds' medians.
ROUNDS = 5

#: Shapes also timed in spaced calls: a server's requests come with gaps, in which spinning threads
#: (fastgru's partner, ONNX Runtime's pool) go to sleep and caches cool.
SPACED_SHAPES = [
    Shape("gru_cell", 1, 1, 256, 256, lbr=True),
    Shape("gru_sequence", 1, 100, 64, 256, lbr=True),
    Shape("gru_sequence", 1, 1, 4, 4),
]

#: Timed calls per (shape, implementation, round) of the spaced benchmark, and the range of the
#: pause before each (seconds): uniform, from one seed per round, so every implementation gets the
#: same schedule. Only the calls are timed.
SPACED_CALLS = 40
PAUSE = (0.002, 0.020)

#: The NumPy reference is no peer: the spaced benchmark leaves it out.
SPACED_IMPLS = [impl for impl in IMPLS if impl != "numpy"]


def _as_tuple(result):
    return result if isinstance(result, tuple) else (result,)


def _check(shape, impl, result, want):
    """The implementation computes the same thing (the float32 tolerance of ``python -m fastgru bench``:
    fastgru.benchmark.TOLERANCES), once per shape."""
    rtol, atol = TOLERANCES["float32"]
    got = _as_tuple(result)
    assert len(got) == len(want), impl
    for g, w in zip(got, want):
        np.testing.assert_allclose(
            np.asarray(g, dtype=np.float64), w.astype(np.float64), rtol=rtol, atol=atol, err_msg=f"{impl} on {shape.id}"
        )


@pytest.mark.parametrize("round_", range(ROUNDS), ids=lambda r: f"round{r}")
@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.id)
def bench_gru(benchmark, shape, impl, round_):
    case = Case(shape)
    try:
        run, result = IMPLS[impl](case)
    except Unavailable as exc:
        pytest.skip(str(exc))
    if round_ == 0:  # once per (shape, implementation); the numpy row checks fastgru against the reference
        _check(shape, impl, result(), _as_tuple(IMPLS["fastgru"](case)[1]()))
    run()  # warm-up: compilation and first-touch outside the timer
    start = time.perf_counter()
    run()
    once = max(time.perf_counter() - start, 1e-7)
    rounds = int(min(2000, max(5, BUDGET / once)))
    benchmark.extra_info.update(machine_info())
    benchmark.extra_info.update(
        shape=shape.id, suite=SUITE_OF[shape.id], impl=impl, flops=shape.flops, round=round_, mode="back-to-back"
    )
    benchmark.pedantic(run, rounds=rounds, iterations=1, warmup_rounds=min(3, rounds))


def pauses(round_):
    """The pauses before the calls of a round (seconds), the same for every implementation."""
    return np.random.default_rng([20261124, round_]).uniform(*PAUSE, SPACED_CALLS)


@pytest.mark.parametrize("round_", range(ROUNDS), ids=lambda r: f"round{r}")
@pytest.mark.parametrize("impl", SPACED_IMPLS)
@pytest.mark.parametrize("shape", SPACED_SHAPES, ids=lambda s: s.id)
def bench_gru_spaced(benchmark, shape, impl, round_):
    """Each call after a pause of PAUSE seconds; bench_gru has checked the results."""
    try:
        run, _ = IMPLS[impl](Case(shape))
    except Unavailable as exc:
        pytest.skip(str(exc))
    run()  # warm-up: compilation and first-touch outside the timer
    schedule = iter(pauses(round_))

    def pause():
        time.sleep(next(schedule))  # setup of each call: outside the timer
        return (), {}

    benchmark.extra_info.update(machine_info())
    benchmark.extra_info.update(
        shape=shape.id,
        suite=SUITE_OF[shape.id],
        impl=impl,
        flops=shape.flops,
        round=round_,
        mode="spaced",
        pause_ms=[PAUSE[0] * 1e3, PAUSE[1] * 1e3],
    )
    benchmark.pedantic(run, setup=pause, rounds=SPACED_CALLS, iterations=1)
