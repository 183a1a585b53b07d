"""The fixed cases whose results every platform must reproduce bit for bit (tests/test_platform_bits.py).

Each case is a few calls of one op (the three functions, a stream fed in chunks, a state pool),
small, with ragged lengths, both directions and linear_before_reset, in float32 and float64. Its
inputs and the results computed on x86-64 in the generic geometry are stored in
``tests/data/platform_bits.npz``; another platform (aarch64, under emulation in CI) reads the
inputs from there, so that nothing depends on how NumPy draws random numbers there.

    FASTGRU_ISA=generic python tests/platform_cases.py

writes that file (x86-64 only: it is the reference the other platforms are compared with), with
the machine, geometry, versions and date it was made on.
"""

import datetime
import json
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import fastgru

DATA = Path(__file__).resolve().parent / "data" / "platform_bits.npz"


@dataclass(frozen=True)
class Case:
    """``kind`` (gru_cell, gru_sequence, augru_sequence, stream or pool) of ``dtype``: batch N, S
    steps, input_size I, hidden_size H, and the op's attributes."""

    name: str
    kind: str
    dtype: str
    shape: tuple
    attrs: dict = field(default_factory=dict)

    @property
    def op(self):
        """The op whose inputs the case takes: a stream's or a pool's own."""
        return self.attrs.get("op", self.kind) if self.kind in ("stream", "pool") else self.kind

    def one_row(self):
        """Whether a call of the case is a single row (batch 1, one direction): the row may be split."""
        return self.shape[0] == 1 and self.attrs.get("direction") != "bidirectional"

    def direct(self):
        """Whether the function API computes the case from the caller's weights as they are (one row,
        one step: ``fastgru/_kernels/direct.py``) instead of on one of the paths."""
        return self.kind in ("gru_cell", "gru_sequence", "augru_sequence") and self.shape[:2] == (1, 1)


#: Few cases, of few distinct kernels: under emulation each kernel's first compilation takes a
#: minute or more, and every case below runs the kernels of its dtype, whatever its op.
CASES = [
    Case("cell-f32", "gru_cell", "float32", (3, 1, 5, 7), {"linear_before_reset": False}),
    Case("cell-f64-lbr", "gru_cell", "float64", (2, 1, 4, 6), {"linear_before_reset": True}),
    Case("cell-f32-row", "gru_cell", "float32", (1, 1, 6, 40), {"linear_before_reset": True}),
    Case("seq-f32-ragged", "gru_sequence", "float32", (5, 6, 5, 9), {"direction": "forward"}),
    Case(
        "seq-f64-bidi",
        "gru_sequence",
        "float64",
        (4, 5, 3, 7),
        {"direction": "bidirectional", "linear_before_reset": True, "clip": 1.5},
    ),
    Case("seq-f32-row-reverse", "gru_sequence", "float32", (1, 7, 4, 33), {"direction": "reverse"}),
    Case("seq-f64-row", "gru_sequence", "float64", (1, 6, 3, 17), {"direction": "forward"}),
    Case("augru-f32", "augru_sequence", "float32", (4, 5, 3, 6)),
    Case("augru-f64-row", "augru_sequence", "float64", (1, 5, 4, 9)),
    Case("stream-f32", "stream", "float32", (3, 7, 4, 8), {"op": "gru_sequence", "chunks": (3, 1, 3)}),
    Case("stream-augru-f64", "stream", "float64", (2, 6, 3, 5), {"op": "augru_sequence", "chunks": (2, 4)}),
    Case("pool-cell-f32", "pool", "float32", (4, 1, 5, 6), {"op": "gru_cell", "steps": ((2, 0), (1, 2, 0), (3,))}),
    Case(
        "pool-seq-f64",
        "pool",
        "float64",
        (3, 3, 2, 5),
        {"op": "gru_sequence", "steps": ((0, 2), (1, 0, 2)), "linear_before_reset": True},
    ),
]

#: The op attributes a case's ``attrs`` may hold (the rest describe the calls).
_ATTRIBUTES = ("direction", "linear_before_reset", "clip")


def make_inputs(case, rng):
    """Random inputs of ``case`` (as the suite's ``make_case`` draws them), by name."""
    from conftest import make_case

    n, s, i, h = case.shape
    kind_attrs = {k: v for k, v in case.attrs.items() if k in ("direction", "linear_before_reset")}
    if case.op == "augru_sequence":
        kind_attrs = {}
    if case.kind == "pool":  # one row per stream, the streams' initial states
        n = max(max(ids) for ids in case.attrs["steps"]) + 1
    made = make_case(rng, op=case.op, batch=n, seq_len=s, input_size=i, hidden_size=h, dtype=case.dtype, **kind_attrs)
    inputs = dict(made.inputs)
    if case.kind == "pool":  # each step's X and lengths, drawn for its streams
        for k, ids in enumerate(case.attrs["steps"]):
            x_shape = (len(ids), i) if case.op == "gru_cell" else (len(ids), s, i)
            inputs[f"X{k}"] = rng.standard_normal(x_shape).astype(case.dtype)
            if case.op != "gru_cell":
                inputs[f"lengths{k}"] = rng.integers(0, s + 1, len(ids))
        del inputs["X"]
    return inputs


def _attributes(case):
    return {k: v for k, v in case.attrs.items() if k in _ATTRIBUTES}


def _prepared(case, inputs):
    cls = {"gru_cell": fastgru.GRUCell, "gru_sequence": fastgru.GRUSequence, "augru_sequence": fastgru.AUGRUSequence}
    return cls[case.op](inputs["W"], inputs["R"], inputs["B"], **_attributes(case))


def run(case, inputs, prepared=False):
    """The results of ``case`` on ``inputs``, by name: an op's outputs (from the function, or with
    ``prepared`` from the prepared op); a stream's Y chunks and final state; a pool's step results
    and final states."""
    if case.kind in ("gru_cell", "gru_sequence", "augru_sequence"):
        if prepared:
            per_call = ("X", "initial_hidden_state", "sequence_lengths", "A")
            results = _prepared(case, inputs)(*(inputs[name] for name in per_call if name in inputs))
        else:
            results = getattr(fastgru, case.kind)(**inputs, **_attributes(case))
        results = results if isinstance(results, tuple) else (results,)
        return {f"out{k}": r for k, r in enumerate(results)}
    op = _prepared(case, inputs)
    if case.kind == "stream":
        stream = op.stream(inputs["initial_hidden_state"], inputs["sequence_lengths"])
        results, start = {}, 0
        for k, size in enumerate(case.attrs["chunks"]):
            chunk = slice(start, start + size)
            args = (inputs["X"][:, chunk],) + ((inputs["A"][:, chunk],) if case.op == "augru_sequence" else ())
            results[f"Y{k}"] = np.array(stream(*args))
            start += size
        results["Ho"] = np.array(stream.Ho)
        return results
    pool = fastgru.StatePool(op, capacity=len(inputs["initial_hidden_state"]) + 1)
    h0 = inputs["initial_hidden_state"]
    ids = [pool.open(h0[k].reshape(pool.state_shape)) for k in range(len(h0))]
    results = {}
    for k, step in enumerate(case.attrs["steps"]):
        lengths = inputs.get(f"lengths{k}")
        results[f"step{k}"] = np.array(pool.step(np.array([ids[j] for j in step]), inputs[f"X{k}"], lengths))
    for j in ids:
        results[f"state{j}"] = pool.state(j)
    return results


def load():
    """(cases' inputs, cases' results, the reference's record) from ``DATA``, by case name."""
    with np.load(DATA) as data:
        arrays = {key: data[key] for key in data.files}
    record = json.loads(str(arrays.pop("record")))
    inputs, results = {}, {}
    for key, value in arrays.items():
        name, part, label = key.split("/")
        (inputs if part == "in" else results).setdefault(name, {})[label] = value
    return inputs, results, record


def write():
    """Compute every case here (x86-64, generic geometry) and store inputs, results and a record."""
    from fastgru import _isa

    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64") or _isa.GEOMETRY.name != "generic":
        sys.exit(f"run on x86-64 with FASTGRU_ISA=generic (here: {machine}, geometry {_isa.GEOMETRY.name})")
    rng = np.random.default_rng(20261125)
    arrays = {}
    for case in CASES:
        inputs = make_inputs(case, rng)
        arrays.update({f"{case.name}/in/{k}": v for k, v in inputs.items()})
        arrays.update({f"{case.name}/out/{k}": v for k, v in run(case, inputs).items()})
    record = {
        "machine": machine,
        "geometry": _isa.describe(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": __import__("numba").__version__,
        "date": datetime.date.today().isoformat(),
    }
    arrays["record"] = np.array(json.dumps(record))
    DATA.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(DATA, **arrays)
    print(f"wrote {DATA.relative_to(Path.cwd()) if DATA.is_relative_to(Path.cwd()) else DATA}: {record}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    write()
