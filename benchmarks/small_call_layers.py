"""What a small call costs, layer by layer, and what Numba's dispatcher costs per argument.

    python benchmarks/small_call_layers.py [--md benchmarks/results/<cpu>/small_call_layers_results.md]

Two tables, float32, one thread's view, warm, medians of interleaved rounds:

1. Numba's dispatcher: a compiled function that returns at once, called with 0 arguments, one
   integer, and 1, 4, 7, 8 and 12 one-dimensional arrays; and, for 7 arrays, a function compiled
   for exactly their types (what ``_kernels/planned.py`` does), which makes a call of other types
   an error instead of a compilation.
2. GRUCell i4 h4 (batch 1) ``cell(x, h, out=h)``, from the public call down: the prepared op's
   call, its plan (``_plan.Plan``), the planned kernel (``run_planned``), and the full path's layers
   beside them (``Packed.compute``, ``_paths.run``, the serial kernel with its 14 arguments).
3. GRUCell i256 h256 (batch 1): ``cell(x, h, out=h)``, and the kernel call of each path a one-row
   cell can take (``_paths.run`` forced to 'serial' and to 'pair'), no other library in the process.
4. The function API's one-row call ``fastgru.gru_cell(x, h, W, R)`` i4 h4, the same arrays again:
   the call, its short path (``_dispatch.DirectPlan``, where the checkout has it), and the full
   path's layers (the checks, ``Unpacked.compute``, the kernel ``run_direct`` with its 12 arguments).

    PYTHONPATH=/path/to/other/checkout python benchmarks/small_call_layers.py   # another checkout's layers
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import machine_info, show  # noqa: E402

import fastgru  # noqa: E402
from fastgru import _paths, _scratch  # noqa: E402
from fastgru._dispatch import NO_ROWS  # noqa: E402
from fastgru._kernels.rows import run_serial  # noqa: E402


def _per_call_ns(call, n):
    start = time.perf_counter_ns()
    for _ in range(n):
        call()
    return (time.perf_counter_ns() - start) / n


def _table(cases, rounds, calls):
    for call in cases.values():
        for _ in range(1000):
            call()
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, call in cases.items():
            times[name].append(_per_call_ns(call, calls))
    return {name: statistics.median(values) for name, values in times.items()}


def dispatcher_cases():
    @numba.njit(nogil=True)
    def f0():
        return 0

    @numba.njit(nogil=True)
    def f1(a):
        return 0

    @numba.njit(nogil=True)
    def fi(a):
        return a

    @numba.njit(nogil=True)
    def f4(a, b, c, d):
        return 0

    @numba.njit(nogil=True)
    def f7(a, b, c, d, e, f, g):
        return 0

    @numba.njit(nogil=True)
    def f8(a, b, c, d, e, f, g, h):
        return 0

    @numba.njit(nogil=True)
    def f12(a, b, c, d, e, f, g, h, i, j, k, m):
        return 0

    arrays = [np.zeros(4, np.float32) for _ in range(12)]
    exact = numba.njit(numba.int64(*[numba.typeof(a) for a in arrays[:7]]), nogil=True)(f7.py_func)
    return {
        "no argument": lambda: f0(),
        "1 integer": lambda: fi(3),
        "1 array": lambda: f1(arrays[0]),
        "4 arrays": lambda: f4(*arrays[:4]),
        "7 arrays": lambda: f7(*arrays[:7]),
        "7 arrays, compiled for exactly their types": lambda: exact(*arrays[:7]),
        "8 arrays": lambda: f8(*arrays[:8]),
        "12 arrays": lambda: f12(*arrays),
    }


def layer_cases():
    rng = np.random.default_rng(0)
    i = h = 4
    cell = fastgru.GRUCell(
        rng.uniform(-0.5, 0.5, (3 * h, i)).astype(np.float32), rng.uniform(-0.5, 0.5, (3 * h, h)).astype(np.float32)
    )
    x, state = rng.standard_normal((1, i)).astype(np.float32), np.zeros((1, h), np.float32)
    cell(x, state, out=state)
    cell(x, state, out=state)
    plans = getattr(cell, "_plans", None)  # None: a checkout from before plans (the "before" column)
    plan = None if plans is None else plans.__dict__[x.shape]
    packed = cell._packed
    X3, h3 = x.reshape(1, 1, i), state.reshape(1, 1, h)
    arrays = (X3, h3, np.ones(1, np.int64), NO_ROWS, packed._no_att, state.reshape(1, 1, 1, h), h3)
    call, floats, ints = _paths._plan(packed, 1, 1, None, 0, 1, 1)
    work, iwork = _scratch.work(floats, ints, packed.compute_dtype)
    planned = {}
    if plan is not None:
        planned = {
            "its plan (_plan.Plan)": lambda: plan(x, state, None, None, state),
            "the planned kernel, 7 arguments (run_planned)": lambda: plan.run(
                x, state, plan.lengths, plan.no_att, state, state, plan.job
            ),
        }
    return {
        "cell(x, h, out=h)": lambda: cell(x, state, out=state),
        **planned,
        "the full path: Packed.compute": lambda: packed.compute(x, state, None, None, (state,)),
        "the full path: _paths.run": lambda: _paths.run(packed, None, 1, 1, arrays, None, 0),
        "the serial kernel, 14 arguments (run_serial)": lambda: run_serial(
            *arrays, packed.weights, call, packed.clip, work, iwork, 0, 0
        ),
    }


def cell256_cases():
    rng = np.random.default_rng(0)
    i = h = 256
    scale = 1 / np.sqrt(h)
    W = rng.uniform(-scale, scale, (3 * h, i)).astype(np.float32)
    R = rng.uniform(-scale, scale, (3 * h, h)).astype(np.float32)
    cell = fastgru.GRUCell(W, R, np.zeros(3 * h, np.float32))
    x, state = rng.standard_normal((1, i)).astype(np.float32), np.zeros((1, h), np.float32)
    packed, out = cell._packed, np.empty((1, h), np.float32)
    h3 = out.reshape(1, 1, h)
    arrays = (
        x.reshape(1, 1, i),
        state.reshape(1, 1, h),
        np.ones(1, np.int64),
        NO_ROWS,
        packed._no_att,
        out.reshape(1, 1, 1, h),
        h3,
    )
    return {
        "cell(x, h, out=h)": lambda: cell(x, state, out=state),
        "the serial path's kernel call (_paths.run 'serial')": lambda: _paths.run(
            packed, "serial", 1, 1, arrays, None, 0
        ),
        "the pair path's kernel call (_paths.run 'pair')": lambda: _paths.run(packed, "pair", 1, 1, arrays, None, 0),
    }


def function_cases():
    from fastgru import _api, _dispatch

    rng = np.random.default_rng(0)
    i = h = 4
    W, R = (rng.uniform(-0.5, 0.5, (3 * h, k)).astype(np.float32) for k in (i, h))
    x, state = rng.standard_normal((1, i)).astype(np.float32), np.zeros((1, h), np.float32)
    kernel_args = []
    run_direct = _dispatch.run_direct
    _dispatch.run_direct = lambda *args: kernel_args.append(args) or run_direct(*args)
    try:
        fastgru.gru_cell(x, state, W, R)  # leaves its short path, where the checkout has one
    finally:
        _dispatch.run_direct = run_direct
    arrays = {"X": x, "initial_hidden_state": state, "W": W, "R": R}
    spec = _api.validate("gru_cell", "cell", arrays)
    unpacked = _dispatch.Unpacked(spec).with_weights(W, R, None)
    seen = getattr(_api, "_seen", {})  # empty: a checkout from before the short path
    short = {}
    if seen:
        (plan,) = seen.values()
        short = {"its short path (_dispatch.DirectPlan)": lambda: plan(x, state, None, W, R, None, None)}
    return {
        "fastgru.gru_cell(x, h, W, R)": lambda: fastgru.gru_cell(x, state, W, R),
        **short,
        "the full checks (_api._arrays, validate)": lambda: _api.validate(
            "gru_cell", "cell", _api._arrays(X=x, initial_hidden_state=state, W=W, R=R)
        ),
        "the full path's compute (Unpacked.compute)": lambda: unpacked.compute(x, state, None),
        "the kernel, 12 arguments (run_direct)": lambda: run_direct(*kernel_args[0]),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--md", default=None)
    args = parser.parse_args(argv)
    machine = machine_info()
    lines = ["| Numba dispatcher, a call of a function that returns at once | ns |", "|---|---|"]
    lines += [f"| {name} | {ns:,.0f} |" for name, ns in _table(dispatcher_cases(), args.rounds, args.calls).items()]
    lines += ["", "| GRUCell i4 h4, batch 1, float32: layer | µs |", "|---|---|"]
    lines += [
        f"| {name} | {ns / 1000:,.2f} |" for name, ns in _table(layer_cases(), args.rounds, args.calls // 4).items()
    ]
    lines += ["", "| GRUCell i256 h256, batch 1, float32 | µs |", "|---|---|"]
    lines += [
        f"| {name} | {ns / 1000:,.2f} |" for name, ns in _table(cell256_cases(), args.rounds, args.calls // 40).items()
    ]
    lines += ["", "| fastgru.gru_cell(x, h, W, R) i4 h4, batch 1, float32: layer | µs |", "|---|---|"]
    lines += [
        f"| {name} | {ns / 1000:,.2f} |" for name, ns in _table(function_cases(), args.rounds, args.calls // 4).items()
    ]
    lines += [
        "",
        f"{machine['cpu']} ({machine['isa']}, geometry {machine['geometry']} compiled for {machine['compiled_for']}), "
        f"numba {machine['numba']}, Python {machine['python']}; medians of {args.rounds} interleaved rounds; "
        f"FASTGRU_SPIN_US {os.environ.get('FASTGRU_SPIN_US', 'unset (1000)')}; {time.strftime('%Y-%m-%d')}.",
        "",
    ]
    show("\n".join(lines), args.md)


if __name__ == "__main__":
    main()
