"""Every op, on every kernel path it can be sent down, against fastgru/reference.py: the function API
and prepared ops, B given or absent (GRUCell-3's is optional), linear_before_reset, every T1 dtype,
one row and more, one step and more, the first call of a shape and the later ones (which take the
short paths: ``DirectPlan``, ``_plan.Plan``).

A one-row call of the function API once read an absent B's fourth block past the end of the zeros
made for it: a wrong answer on a valid input that no test saw, because the only cell test without
B had three rows. This matrix crosses every such axis, and asserts the kernel each call ran, so that
a path no case reaches cannot hide. ``.ci/run`` also runs it under Numba's bounds checking
(``NUMBA_BOUNDSCHECK=1``), where a read past an array raises instead of returning what lies there.
"""

import os
import subprocess
import sys
import textwrap
import threading

import numba
import numpy as np
import pytest
from conftest import DTYPES, assert_close, expected_kernel, make_case, reach
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastgru
from fastgru import _api, _partner, reference

pytestmark = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba has a single thread here")

#: (op, options of make_case): every op with each attribute that changes what the kernels read: B
#: absent or given, linear_before_reset (AUGRU has neither: its B is required, its
#: linear_before_reset fixed), the three directions, one step or more.
OPS = [
    ("gru_cell", {"with_bias": with_bias, "linear_before_reset": lbr})
    for with_bias in (True, False)
    for lbr in (False, True)
]
OPS += [
    ("gru_sequence", {"direction": direction, "linear_before_reset": lbr, "seq_len": seq_len})
    for direction in ("forward", "reverse", "bidirectional")
    for lbr in (False, True)
    for seq_len in (1, 4)
]
OPS += [("augru_sequence", {"seq_len": seq_len}) for seq_len in (1, 4)]

PATHS = ("serial", "parallel", "split", "pair")
FORMS = ("function", "prepared")
#: Calls of each shape: the first takes the full checks, the later ones the shape's short path.
CALLS = 3


def case_id(case):
    op, options = case
    return "-".join([op] + [f"{k}={v}" for k, v in options.items()])


def run_form(form, op, case):
    """One call of ``op`` on ``case``: the function API's, or a prepared op's (``case.prepared``)."""
    if form == "function":
        return getattr(fastgru, op)(**case.inputs, **case.attrs)
    inputs = case.inputs
    if op == "gru_cell":
        return case.prepared(inputs["X"], inputs["initial_hidden_state"])
    args = inputs["X"], inputs["initial_hidden_state"], inputs["sequence_lengths"]
    return case.prepared(*args, inputs["A"]) if op == "augru_sequence" else case.prepared(*args)


def prepare(op, case):
    """The prepared op of ``case``'s weights and attributes."""
    weights = {name: case.inputs.get(name) for name in ("W", "R", "B")}
    if op == "gru_cell":
        return fastgru.GRUCell(**weights, **case.attrs)
    if op == "augru_sequence":
        return fastgru.AUGRUSequence(**weights, **case.attrs)
    return fastgru.GRUSequence(**weights, **case.attrs)


def expected(form, path, op, options, batch):
    """The kernel a call of ``form`` runs on ``reach``'s ``path``: the function API's call of one
    row and one step runs the direct driver (shared with the partner on the pair path, one
    direction), every other call the path's own (``expected_kernel``)."""
    one_step = op == "gru_cell" or options.get("seq_len") == 1
    one_direction = options.get("direction") != "bidirectional"
    if form == "function" and batch == 1 and one_step:
        return "run_direct_pair" if path == "pair" and one_direction else "run_direct"
    return expected_kernel(path, batch == 1 and one_direction)


def check_calls(monkeypatch, kernels_run, form, path, op, options, dtype, batch, seed):
    """CALLS calls of one shape on ``path``, each against the reference and on the expected kernel;
    the caller's arrays unchanged."""
    if path == "pair" and not _partner.PARTNER.enabled:
        pytest.skip(f"no partner thread here ({_partner.off_reason()})")
    case = make_case(
        np.random.default_rng(seed), op=op, batch=batch, input_size=5, hidden_size=7, dtype=dtype, **options
    )
    before = {name: a.copy() for name, a in case.inputs.items()}
    # fastgru.reference takes B, as the specification's equations do: zeros of the op's shape when absent
    full = dict(case.inputs)
    full.setdefault("B", np.zeros((4 if options.get("linear_before_reset") else 3) * 7, dtype))
    want = getattr(reference, op)(**full, **case.attrs)
    with monkeypatch.context() as patch:
        patch.setattr(_api, "_seen", threading.local())  # the function API's first call of this shape is a first call
        reach(patch, path)
        case.prepared = prepare(op, case) if form == "prepared" else None
        kernels_run.clear()
        for k in range(CALLS):
            assert_close(run_form(form, op, case), want, dtype, what=f"call {k + 1}")
    kernel = expected(form, path, op, options, batch)
    assert [name.rstrip("+") for name in kernels_run] == [kernel] * CALLS, kernels_run
    for name, a in case.inputs.items():
        np.testing.assert_array_equal(a, before[name], err_msg=f"{name} was written")


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("op, options", OPS, ids=[case_id(case) for case in OPS])
def test_every_call_matches_the_reference(monkeypatch, kernels_run, form, path, op, options, dtype, batch):
    check_calls(monkeypatch, kernels_run, form, path, op, options, dtype, batch, seed=batch)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    form=st.sampled_from(FORMS),
    path=st.sampled_from(PATHS),
    case=st.sampled_from(OPS),
    dtype=st.sampled_from([param.values[0] for param in DTYPES if param.values[0] is not None]),
    batch=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    clip=st.sampled_from([np.inf, 0.7]),
    activations=st.tuples(*[st.sampled_from(["relu", "sigmoid", "tanh"])] * 2),
)
def test_drawn_calls_match_the_reference(
    monkeypatch, kernels_run, form, path, case, dtype, batch, seed, clip, activations
):
    op, options = case
    if op != "augru_sequence":  # AUGRU's clip and activations are fixed
        options = {**options, "clip": clip, "activations": activations}
    check_calls(monkeypatch, kernels_run, form, path, op, options, dtype, batch, seed)


def test_bounds_checking_makes_a_read_past_an_array_an_error():
    """Under NUMBA_BOUNDSCHECK=1 (``.ci/boundscheck``), the kernels' flat loads and stores raise on an
    index outside their array, which they otherwise read and write unchecked."""
    code = textwrap.dedent(
        """
        import numpy as np
        from numba import njit
        from fastgru import _config
        from fastgru._kernels.memory import load, load_as, store

        assert "-boundscheck" in _config.CACHE_TAG
        a, like = np.zeros(4, np.float32), np.zeros(0, np.float32)
        read, write, read_as = njit(lambda a, i: load(a, i)), njit(lambda a, i: store(a, i, 1.0)), load_as
        assert read(a, 3) == 0 and read_as(a.view(np.uint16), 3, like) == 0
        for name, call in (("load", lambda: read(a, 4)), ("store", lambda: write(a, -1)),
                           ("load_as", lambda: read_as(a.view(np.uint16), 4, like))):
            try:
                call()
            except IndexError as error:
                assert name in str(error), error
            else:
                raise AssertionError(f"{name} past the array did not raise")
        """
    )
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "FASTGRU_NO_CACHE": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
