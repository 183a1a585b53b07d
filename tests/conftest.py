"""Shared test helpers: a seeded generator, random cases of the three ops, the available dtypes
and one tolerance table per dtype for fastgru against fastgru/reference.py."""

from dataclasses import dataclass, field

import numpy as np
import pytest

import fastgru
from fastgru import reference

try:
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # bfloat16 is optional (docs/semantics.md, "Types")
    BFLOAT16 = None


def available_dtypes():
    """The T1 dtypes this installation supports: bfloat16 only when ml_dtypes imports."""
    dtypes = [np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)]
    return dtypes if BFLOAT16 is None else dtypes + [BFLOAT16]


#: Every T1 dtype as pytest parameters; bfloat16 is a skipped parameter when ml_dtypes is absent.
DTYPES = [
    pytest.param(np.dtype(np.float16), id="float16"),
    pytest.param(np.dtype(np.float32), id="float32"),
    pytest.param(np.dtype(np.float64), id="float64"),
    pytest.param(
        BFLOAT16, id="bfloat16", marks=pytest.mark.skipif(BFLOAT16 is None, reason="ml_dtypes is not installed")
    ),
]

#: (rtol, atol) of fastgru against fastgru/reference.py, per T1 dtype; a value passes when
#: |got - want| <= atol + rtol * |want|. Measured over this suite's cases and ~4000 random calls per dtype
#: (hidden_size 1 to 64, up to 40 steps, every activation pair, clip, linear_before_reset):
#: - float64: the same formulas in float64, only the summation order differs: up to 4e-15.
#: - float32: both in float32, but fastgru's tanh and sigmoid are its own, within 2 ulp of the
#:   correctly rounded values (tests/test_activations.py), and its sums run in another order: up to
#:   4e-6 in this suite (a quarter of the tolerance), 5e-6 after 40 steps.
#:   Beyond that only ill-conditioned runs (hidden_size 1, tanh as f, 40 steps), where the float32
#:   reference is itself 5e-4 away from float64, so no float32 tolerance could be honest there.
#: - float16 / bfloat16: both run the float32 computation above and round once at the end, so they
#:   differ by at most one unit in the last place of the format (float16 eps 2**-10, bfloat16
#:   2**-7) where the float32 values straddle a rounding boundary; rtol is two units, atol the
#:   float32 deviation, for values near zero, where a unit of the format is smaller than that.
TOLERANCES = {
    "float64": (1e-12, 1e-13),
    "float32": (1e-5, 2e-6),
    "float16": (2 * 2.0**-10, 5e-6),
    "bfloat16": (2 * 2.0**-7, 5e-6),
}


def tolerance(dtype):
    """(rtol, atol) of TOLERANCES for a dtype."""
    return TOLERANCES[np.dtype(dtype).name]


#: Per dtype name, the largest |got - want| and the largest fraction of the tolerance used that
#: assert_close has seen in this session; printed at the end of the run.
DEVIATIONS = {}


def assert_close(got, want, dtype=None, what=""):
    """Assert that fastgru's results ``got`` (an array or a tuple of arrays) match the reference's
    ``want`` elementwise within the tolerance of ``dtype`` (default: the dtype of ``want``), with the
    same shapes and dtypes, and NaN exactly where the reference has NaN."""
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want), f"{what}: {len(got)} results, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        label = f"{what} result {i}"
        assert isinstance(g, np.ndarray), f"{label}: {type(g).__name__} is not an ndarray"
        assert g.shape == w.shape, f"{label}: shape {g.shape}, expected {w.shape}"
        assert g.dtype == w.dtype, f"{label}: dtype {g.dtype}, expected {w.dtype}"
        name = np.dtype(w.dtype if dtype is None else dtype).name
        rtol, atol = TOLERANCES[name]
        g64, w64 = g.astype(np.float64), w.astype(np.float64)
        np.testing.assert_allclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True, err_msg=label)
        finite = np.isfinite(w64)
        if finite.any():
            diff = np.abs(g64[finite] - w64[finite])
            seen = DEVIATIONS.get(name, (0.0, 0.0))
            DEVIATIONS[name] = (
                max(seen[0], diff.max()),
                max(seen[1], (diff / (atol + rtol * np.abs(w64[finite]))).max()),
            )


def pytest_terminal_summary(terminalreporter):
    if DEVIATIONS:
        seen = ", ".join(f"{name} {d:.3g} ({f:.2f})" for name, (d, f) in sorted(DEVIATIONS.items()))
        terminalreporter.write_line(f"fastgru vs fastgru.reference, largest |difference| (share of tolerance): {seen}")


def run_both(op, case):
    """(fastgru's results, the reference's results) of one case of ``op``."""
    got = getattr(fastgru, op)(**case.inputs, **case.attrs)
    want = getattr(reference, op)(**case.inputs, **case.attrs)
    return got, want


@pytest.fixture
def rng():
    """A generator with a fixed seed: every test sees the same data on every run."""
    return np.random.default_rng(20261122)


@dataclass
class Case:
    """The arguments of one call: ``op(**case.inputs, **case.attrs)``."""

    inputs: dict
    attrs: dict = field(default_factory=dict)


def make_lengths(rng, batch, seq_len, ragged=True, low=0):
    """sequence_lengths (int64): all seq_len, or random in [low, seq_len] with both low and seq_len
    present (at random rows) when batch >= 2."""
    if not ragged:
        return np.full(batch, seq_len, dtype=np.int64)
    lengths = rng.integers(low, seq_len + 1, batch)
    if batch >= 2:
        rows = rng.choice(batch, 2, replace=False)
        lengths[rows] = [seq_len, low]
    return lengths.astype(np.int64)


def show_lines(request, lines):
    """Write ``lines`` to the terminal from a fixture's teardown, shown even without -s."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    if capture is not None and reporter is not None:
        with capture.global_and_fixture_disabled():
            for line in lines:
                reporter.write_line(line)
    else:  # pragma: no cover
        print("\n".join(lines))


def make_case(
    rng,
    *,
    op="gru_sequence",
    batch=3,
    seq_len=5,
    input_size=4,
    hidden_size=6,
    dtype=np.float32,
    direction="forward",
    linear_before_reset=False,
    ragged=True,
    lengths=None,
    lengths_dtype=np.int64,
    layout="documented",
    with_bias=True,
    **attrs,
):
    """Random inputs of one call of ``op`` ("gru_cell", "gru_sequence" or "augru_sequence").

    X and initial_hidden_state are standard normal; W, R and B uniform in ±1/sqrt(hidden_size), as
    frameworks initialise them, so that states neither vanish nor saturate within a few steps; A
    uniform in [0, 1]. ``lengths`` overrides the random (``ragged``) or full sequence_lengths;
    ``layout`` is the AUGRU layout, "documented" (2-D) or "openvino" (GRUSequence ranks, D = 1);
    ``with_bias=False`` leaves out gru_cell's optional B. Other keywords are attributes of the call.
    """
    dtype = np.dtype(dtype)
    d = 2 if direction == "bidirectional" else 1
    gates = 4 if linear_before_reset else 3
    scale = 1 / np.sqrt(hidden_size)

    def normal(*shape):
        return rng.standard_normal(shape).astype(dtype)

    def uniform(*shape, low=-scale, high=scale):
        return rng.uniform(low, high, shape).astype(dtype)

    if op == "gru_cell":
        inputs = {
            "X": normal(batch, input_size),
            "initial_hidden_state": normal(batch, hidden_size),
            "W": uniform(3 * hidden_size, input_size),
            "R": uniform(3 * hidden_size, hidden_size),
        }
        if with_bias:
            inputs["B"] = uniform(gates * hidden_size)
        return Case(inputs, {"linear_before_reset": linear_before_reset, **attrs})

    if lengths is None:
        lengths = make_lengths(rng, batch, seq_len, ragged)
    lengths = np.asarray(lengths).astype(lengths_dtype)
    if op == "gru_sequence":
        inputs = {
            "X": normal(batch, seq_len, input_size),
            "initial_hidden_state": normal(batch, d, hidden_size),
            "sequence_lengths": lengths,
            "W": uniform(d, 3 * hidden_size, input_size),
            "R": uniform(d, 3 * hidden_size, hidden_size),
            "B": uniform(d, gates * hidden_size),
        }
        return Case(inputs, {"direction": direction, "linear_before_reset": linear_before_reset, **attrs})

    assert op == "augru_sequence", op
    assert layout in ("documented", "openvino"), layout
    lead = () if layout == "documented" else (1,)
    h0_shape = (batch, hidden_size) if layout == "documented" else (batch, 1, hidden_size)
    inputs = {
        "X": normal(batch, seq_len, input_size),
        "initial_hidden_state": normal(*h0_shape),
        "sequence_lengths": lengths,
        "W": uniform(*lead, 3 * hidden_size, input_size),
        "R": uniform(*lead, 3 * hidden_size, hidden_size),
        "B": uniform(*lead, 3 * hidden_size),
        "A": uniform(batch, seq_len, 1, low=0.0, high=1.0),
    }
    return Case(inputs, attrs)


# ------------------------------------------------------------------------------------ kernel paths


def watch_entries(monkeypatch, see):
    """From now on in the test, every kernel call tells ``see(kinds, answer)``: the driver of each of
    its jobs ('serial', 'parallel', 'split', 'pair', 'direct', 'direct_pair'; ``_kernels/drivers.py``)
    and the entry's answer (1 when the partner took its part). Plans compiled their entry when they
    were made: the tuning's generation moves on, so that every plan is made again, with entries
    that tell, and once more when the test ends."""
    from fastgru import _plan, _tuning
    from fastgru._kernels import drivers
    from fastgru._kernels.jobs import JOB

    made = _plan.entry

    def kinds(jobs):
        return [drivers.driver_of(address) for address in jobs[:, JOB["callback"]]]

    def telling(signature, direct=False):
        entry = made(signature, direct)

        def told(*args):
            answer = entry(*args)
            if answer >= 0:
                see(kinds(args[-1]), answer)
            return answer

        return told

    monkeypatch.setattr(_plan, "entry", telling)
    # a change of the tuning table moves its generation on, and so does its undo: plans are made
    # again now, with entries that tell, and again after the test, without them
    monkeypatch.setattr(_tuning, "SPIN_US", _tuning.SPIN_US)


@pytest.fixture
def kernels_run(monkeypatch):
    """The kernels that the test's calls ran, in order, by name, one per layer of each kernel call:
    "run_serial", "run_parallel", "run_split", "run_pair", or the function API's "run_direct" or
    "run_direct_pair"; "run_pair" is "run_pair+" when the partner thread took the job (else the
    calling thread ran both halves), and so is "run_direct_pair". Safe from any thread."""
    names = []

    def see(kinds, answer):
        taken = "+" if answer == 1 else ""
        names.extend("run_" + kind + (taken if kind in ("pair", "direct_pair") else "") for kind in kinds)

    watch_entries(monkeypatch, see)
    return names


def reach(monkeypatch, path, hoist=True):
    """Patch fastgru's tuning so that every call of the test takes ``path``, however small: 'serial';
    'parallel' (a single row: serial); 'split' (a single row split in a Numba parallel region, the
    partner thread off; more rows: parallel); 'pair' (a single row with the partner thread, which
    every call wakes; more rows: parallel); 'wave' (as 'pair', and a stack of forward layers at one
    row as a wavefront with the partner thread, however large its layers, at every call; no other
    path takes one). ``hoist=False``: X·Wᵀ is computed step by step."""
    from fastgru import _partner, _tuning

    never = 10**18
    patches = {
        "SERIAL_BELOW_FLOPS": never if path == "serial" else 0,
        "SPLIT_FROM_HIDDEN": never,
        "SPLIT_FROM_STEPS": 1,
        "PAIR_FROM_HIDDEN": never,
        "PAIR_FROM_FLOPS": 0,
        "PAIR_WAKE_FLOPS": 0,
        "WAVE_MAX_BYTES": never if path == "wave" else 0,
        "WAVE_RETRY": 0,  # a call that may take the wavefront takes it (no race with the layers' paths)
    }
    if path == "split":
        patches["SPLIT_FROM_HIDDEN"] = 1
        monkeypatch.setattr(_partner.PARTNER, "enabled", False)
    if path in ("pair", "wave"):
        patches["PAIR_FROM_HIDDEN"] = 1
    if not hoist:
        patches["HOIST_BYTES"] = 0
    for name, value in patches.items():
        monkeypatch.setattr(_tuning, name, value)


#: Paths as reach() names them, each with and without the hoisted projection where it matters.
PATHS = [("serial", True), ("serial", False), ("parallel", True), ("parallel", False), ("split", True), ("pair", True)]


def on_every_path(monkeypatch, kernels_run, call, one_row, calls=1):
    """{"path-hoist": call()} for each of PATHS (pair only where the partner thread runs), each after
    ``reach`` of its path; asserts that the ``calls`` kernel calls that ``call`` makes ran the path's
    kernel."""
    from fastgru import _partner

    results = {}
    for path, hoist in PATHS:
        if path == "pair" and not _partner.PARTNER.enabled:
            continue
        with monkeypatch.context() as patch:
            reach(patch, path, hoist)
            kernels_run.clear()
            results[f"{path}-{hoist}"] = call()
        want = expected_kernel(path, one_row)
        assert [name.rstrip("+") for name in kernels_run] == [want] * calls, (path, kernels_run)
    return results


def expected_kernel(path, one_row):
    """The kernel that ``reach(path)`` runs for a call of one row (batch 1, one direction) or more."""
    if path == "serial" or (path == "parallel" and one_row):
        return "run_serial"
    return {"split": "run_split", "pair": "run_pair"}[path] if one_row else "run_parallel"
