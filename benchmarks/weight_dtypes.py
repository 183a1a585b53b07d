"""The weight-dtype table: fastgru's prepared ops with float32, bfloat16 and int8 weights, beside torch
(float32 and dynamic int8) and OpenVINO (f32 hint and its default precision), speed and accuracy, in
one process.

    python benchmarks/weight_dtypes.py [--rounds 7] [--seconds 0.1] [--quick]
                                       [--out benchmarks/results/<cpu>/weight_dtypes_results]

Writes ``PREFIX.json`` (the machine, every round of every row, every error), ``PREFIX.md`` (the
tables) and ``PREFIX_table.md`` (the README's summary, put between its markers with ``--readme``),
PREFIX being ``--out``; ``--report`` writes the last two from the JSON. ``--quick`` (2 rounds of
0.01 s, 200 random states for the one-step errors) is a smoke run: its times are not for quoting.
Run the full one alone on the machine (benchmarks/README.md).

Speed (float32 inputs, outputs and states for all; 2 threads for every runtime; µs per call, the
median over interleaved rounds, and the ratio to fastgru float32): GRUSequence batch 1 × 100 steps,
forward, linear_before_reset=True, i256 h256, i256 h512 and i1024 h1024; the DIEN shape b128 s50
i36 h36 as GRUSequence (linear_before_reset=True, so that torch can join) and as AUGRUSequence
(OpenVINO through its CPU plugin's internal op, ``tests/openvino_oracle.py``; torch has no AUGRU).
Rows:

- ``fastgru float32``, ``fastgru bfloat16`` and ``fastgru int8``: the prepared op (``out=``
  preallocated) built with ``weight_dtype=None``, ``"bfloat16"`` and ``"int8"`` (weights stored in
  that type, int8 symmetric with one scale per output row, computation in float32);
- ``torch float32``: ``torch.nn.GRU`` under ``torch.inference_mode()``;
- ``torch int8 dynamic (not exact)``: ``torch.ao.quantization.quantize_dynamic(.., {nn.GRU},
  dtype=torch.qint8)`` of that GRU: int8 weights per tensor, and the inputs and states of every
  product quantized to 8 bits per call, so a different computation (its deprecation warning is
  recorded, not shown). quantize_dynamic swaps only the children of the module it is given, so the GRU
  is quantized inside a container (``peers.torch_dynamic_int8``);
- ``OpenVINO f32``: ``INFERENCE_PRECISION_HINT`` f32, weights as Constants (``peers.openvino_cpu``);
- ``OpenVINO default``: the same model without the hint; the precision the plugin chose (the
  compiled model's INFERENCE_PRECISION_HINT) is in the row's name. OpenVINO runs bf16 only on CPUs
  with AVX512_BF16 or AMX; elsewhere its default is f32.

Every round times each row of each shape in turn (the order alternating between rounds), after a
pause of 20 ms (the spinning threads of the previous runtime fall asleep) and three untimed calls, for
``--seconds`` (at least 3 calls); a row gives the median over rounds of the per-call means. Outside
the timer each row's Ho is compared once with fastgru float32's (``max |ΔHo| vs f32`` in the JSON).

Accuracy (no timing): a ``torch.nn.GRU`` of torch's default initialisation (seeded), X ~ N(0, 1),
h0 zero, 100 steps, batch 1 and 16, i256 h256 and i256 h512: max |Ho - exact| and max |Y - exact|,
exact being ``fastgru.reference.gru_sequence`` in float64 on the same float32 weights (biases summed
in float64). The weights reach fastgru through ``fastgru.from_torch(.., weight_dtype=)`` (torch's
gates r, z, n as z, r, h; B = [b_iz + b_hz, b_ir + b_hr, b_in, b_hn]). Rows: fastgru float32,
bfloat16 and int8; torch float32 and int8 dynamic; OpenVINO default (whatever precision it ran);
and two NumPy emulations of a bf16 runtime, which are not OpenVINO: W, R, X and the state fed to
each step's products rounded to bfloat16 (to nearest, ties to even), products accumulated and gates
computed in float32, the state carried in float32 (``bf16 emulation``) or stored in bfloat16 after
each step (``bf16 emulation, bf16 state``). The same for one step (GRUCell): max |Ho - exact| over
1000 random rows (X ~ N(0, 1), states uniform in [-1, 1]).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import machine_info, results_dir  # noqa: E402  (also imports openvino first: Numba then picks TBB)
from peers import (  # noqa: E402
    THREADS,
    Case,
    Shape,
    Unavailable,
    case_of,
    openvino_compiled,
    openvino_cpu,
    torch_dynamic_int8,
    torch_gru,
    torch_gru_module,
)

import fastgru  # noqa: E402
from fastgru import reference  # noqa: E402

SPEED_SHAPES = [
    Shape("gru_sequence", 1, 100, 256, 256, lbr=True),
    Shape("gru_sequence", 1, 100, 256, 512, lbr=True),
    Shape("gru_sequence", 1, 100, 1024, 1024, lbr=True),
    Shape("gru_sequence", 128, 50, 36, 36, lbr=True),
    Shape("augru_sequence", 128, 50, 36, 36),
]
WEIGHT_DTYPES = {"float32": None, "bfloat16": "bfloat16", "int8": "int8"}
ACCURACY_SIZES = [(256, 256), (256, 512)]
ACCURACY_BATCHES = (1, 16)
STEPS = 100
SEED = 0
BF16_NOTE = "OpenVINO runs bf16 only on CPUs with AVX512_BF16 or AMX"
TORCH_INT8 = "torch int8 dynamic (not exact)"


# ------------------------------------------------------------------------------------------ fastgru


def fastgru_op(op, W, R, B, lbr, weight_dtype):
    """fastgru's prepared op (GRUCell takes W[0], R[0], B[0]) with ``weight_dtype``."""
    if op == "gru_cell":
        return fastgru.GRUCell(W[0], R[0], B[0], linear_before_reset=lbr, weight_dtype=weight_dtype)
    if op == "augru_sequence":
        return fastgru.AUGRUSequence(W, R, B, weight_dtype=weight_dtype)
    return fastgru.GRUSequence(W, R, B, linear_before_reset=lbr, weight_dtype=weight_dtype)


def fastgru_prepared(case, weight_dtype):
    """(run, result) of the prepared op of ``case`` with ``out=`` preallocated."""
    c, shape = case, case.shape
    op = fastgru_op(shape.op, c.W, c.R, c.B, shape.lbr, weight_dtype)
    out = (np.empty((shape.batch, 1, shape.seq, shape.hidden), np.float32), np.empty_like(c.H0))
    args = (c.X, c.H0, c.lengths) + ((c.A,) if shape.op == "augru_sequence" else ())
    return (lambda: op(*args, out=out)), (lambda: op(*args))


# -------------------------------------------------------------------------------------------- speed


def _torch_int8(case):
    import torch

    module, x, h0 = torch_gru_module(case)
    quantized, _ = torch_dynamic_int8(module)
    n, s, h = case.shape.batch, case.shape.seq, case.shape.hidden

    def run():
        with torch.inference_mode():
            return quantized(x, h0)

    def result():
        Y, Hn = run()
        return Y.numpy().reshape(n, 1, s, h), Hn.numpy().transpose(1, 0, 2)

    return run, result


def speed_rows(case):
    """[(name, weights, builder)] of a shape; builder() gives (run, result) or raises Unavailable, and
    may rename the row (OpenVINO default: the precision it chose)."""
    rows = [
        (f"fastgru {label}", label, lambda wd=wd: fastgru_prepared(case, wd)) for label, wd in WEIGHT_DTYPES.items()
    ]
    rows += [
        ("torch float32", "float32", lambda: torch_gru(case)),
        (TORCH_INT8, "int8 per tensor, activations 8-bit", lambda: _torch_int8(case)),
        ("OpenVINO f32", "float32", lambda: openvino_cpu(case)),
        ("OpenVINO default", "float32 given", lambda: openvino_compiled(case, {})),
    ]
    return rows


def _per_call_us(run, n):
    start = time.perf_counter_ns()
    for _ in range(n):
        run()
    return (time.perf_counter_ns() - start) / n / 1000


def measure_speed(rounds, seconds, log):
    """Records of every (shape, row): median µs per call over interleaved rounds, or why not available."""
    import torch

    torch.set_num_threads(THREADS)
    records, timed = [], []  # timed: per shape, [(record, run, calls)]
    for shape in SPEED_SHAPES:
        case = Case(shape)
        rows, base = [], None
        for name, weights, build in speed_rows(case):
            record = {"shape": shape.id, "implementation": name, "weights": weights}
            records.append(record)
            try:
                built = build()
            except Unavailable as exc:
                record["available"], record["reason"] = False, str(exc)
                log(f"{shape.id:32s} {name:34s} not available: {exc}")
                continue
            run, result = built[0], built[1]
            if len(built) == 3:  # OpenVINO default: the precision it chose
                record["implementation"] = name = f"OpenVINO default ({built[2]})"
                record["weights"] = weights = f"float32 given, ran {built[2]}"
                record["openvino_precision"] = built[2]
            record["available"] = True
            ho = np.asarray(result()[-1], np.float64)
            if base is None:  # fastgru float32 comes first
                base = ho
            record["max_abs_diff_Ho_vs_fastgru_float32"] = float(np.abs(ho - base).max())
            for _ in range(3):
                run()
            once = min(_per_call_us(run, 1) for _ in range(3))
            calls = max(3, math.ceil(seconds * 1e6 / max(once, 1e-3)))
            record["calls_per_round"], record["rounds_us"] = calls, []
            rows.append((record, run, calls))
        timed.append(rows)
    for k in range(rounds):
        for rows in timed:
            for record, run, calls in rows if k % 2 == 0 else rows[::-1]:
                time.sleep(0.02)  # the previous runtime's spinning threads go to sleep
                for _ in range(3):
                    run()
                record["rounds_us"].append(_per_call_us(run, calls))
        log(f"round {k + 1}/{rounds} done")
    for rows in timed:
        base = rows[0][0] if rows and rows[0][0]["implementation"] == "fastgru float32" else None
        for record, _, _ in rows:
            record["us"] = statistics.median(record["rounds_us"])
        for record, _, _ in rows:
            record["ratio_to_fastgru_float32"] = record["us"] / base["us"] if base else None
            log(
                f"{record['shape']:32s} {record['implementation']:34s} {record['us']:12.1f} us"
                + (f"  x{record['ratio_to_fastgru_float32']:.2f}" if base else "")
                + f"  |dHo| vs f32 {record['max_abs_diff_Ho_vs_fastgru_float32']:.1e}"
            )
    return records


# ----------------------------------------------------------------------------------------- accuracy


def bf16_round(a):
    """float32 ``a`` rounded to the nearest bfloat16 (ties to even), as float32 (finite values)."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32)
    u = (u + (np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    return u.view(np.float32)


def _sigmoid32(v):
    with np.errstate(over="ignore"):
        return (np.float32(1) / (np.float32(1) + np.exp(-v))).astype(np.float32)


def bf16_emulation(X, H0, W, R, B, state_bf16=False):
    """(Y (N, 1, S, H), Ho (N, 1, H)) of a forward GRUSequence with linear_before_reset, as a bf16
    runtime computes it (an emulation in NumPy, not OpenVINO): W, R, X and the state fed to each
    step's recurrent product rounded to bfloat16, products accumulated in float32 (sgemm of the
    rounded values, which are exact in float32), gates and the state update in float32; the state is
    stored rounded to bfloat16 after each step when ``state_bf16``."""
    n, s, _ = X.shape
    h = R.shape[-1]
    Wb, Rb, B = bf16_round(W[0]), bf16_round(R[0]), B[0].astype(np.float32)
    gx = (bf16_round(X).reshape(n * s, -1) @ Wb.T).reshape(n, s, 3 * h)  # every step's input product
    H = H0[:, 0].astype(np.float32)
    Y = np.empty((n, 1, s, h), np.float32)
    for t in range(s):
        gh = bf16_round(H) @ Rb.T
        z = _sigmoid32(gx[:, t, :h] + gh[:, :h] + B[:h])
        r = _sigmoid32(gx[:, t, h : 2 * h] + gh[:, h : 2 * h] + B[h : 2 * h])
        c = np.tanh(gx[:, t, 2 * h :] + B[2 * h : 3 * h] + r * (gh[:, 2 * h :] + B[3 * h :]))
        H = ((np.float32(1) - z) * c + z * H).astype(np.float32)
        if state_bf16:
            H = bf16_round(H)
        Y[:, 0, t] = H
    return Y, H[:, None]


def openvino_arrays(state, dtype):
    """(W (1, 3H, I), R (1, 3H, H), B (1, 4H)) in OpenVINO's layout and gate order z, r, h from a
    torch.nn.GRU's layer-0 state (NumPy arrays, gates r, z, n), in ``dtype`` (the biases summed in
    it): B = [b_iz + b_hz, b_ir + b_hr, b_in, b_hn], as fastgru.from_torch converts them."""

    def zrh(a):
        r, z, n = np.split(a.astype(dtype), 3)
        return np.concatenate([z, r, n])

    b_ih, b_hh = zrh(state["bias_ih_l0"]), zrh(state["bias_hh_l0"])
    h = b_ih.shape[0] // 3
    B = np.concatenate([b_ih[: 2 * h] + b_hh[: 2 * h], b_ih[2 * h :], b_hh[2 * h :]])
    return zrh(state["weight_ih_l0"])[None], zrh(state["weight_hh_l0"])[None], B[None]


def _fastgru_sequence(module, weight_dtype):
    """(op, how): layer 0 of ``fastgru.from_torch(module, weight_dtype=)``."""
    return fastgru.from_torch(module, weight_dtype=weight_dtype).layers[0], "fastgru.from_torch"


def _errors(got, exact):
    return {what: float(np.abs(np.asarray(g, np.float64) - e).max()) for what, g, e in zip(("Ho", "Y"), got, exact)}


def accuracy_modes(module, W, R, B, ov_case, sequence):
    """[(mode, compute or Unavailable)] where compute(X, H0) gives (Ho, Y) float32 in fastgru's layout
    (Y None for one step); ``sequence`` False for the one-step (GRUCell) modes."""
    import torch

    modes = []
    for label, wd in WEIGHT_DTYPES.items():
        try:
            if sequence:
                op, how = _fastgru_sequence(module, wd)
                modes.append((f"fastgru {label}", lambda X, H0, op=op: op(X, H0, None)[::-1], how))
            else:
                op = fastgru_op("gru_cell", W, R, B, True, wd)
                modes.append((f"fastgru {label}", lambda X, H0, op=op: (op(X[:, 0], H0[:, 0])[:, None], None), ""))
        except Unavailable as exc:
            modes.append((f"fastgru {label}", exc, ""))

    def torch_run(m):
        def compute(X, H0):
            with torch.inference_mode():
                y, hn = m(torch.from_numpy(X), torch.from_numpy(np.ascontiguousarray(H0.transpose(1, 0, 2))))
            n, s, h = y.shape
            return hn.numpy().transpose(1, 0, 2), (y.numpy().reshape(n, 1, s, h) if sequence else None)

        return compute

    modes.append(("torch float32", torch_run(module), ""))
    try:
        modes.append((TORCH_INT8, torch_run(torch_dynamic_int8(module)[0]), ""))
    except Unavailable as exc:
        modes.append((TORCH_INT8, exc, ""))
    try:
        _, result, precision = openvino_compiled(ov_case, {})
        name = f"OpenVINO default ({precision})"
        if sequence:
            modes.append((name, lambda X, H0: result()[::-1], ""))
        else:
            modes.append((name, lambda X, H0: (result()[0][:, None], None), ""))
    except Unavailable as exc:
        modes.append(("OpenVINO default", exc, ""))
    for name, state_bf16 in (("bf16 emulation (NumPy, not OpenVINO)", False), ("bf16 emulation, bf16 state", True)):

        def emulate(X, H0, state_bf16=state_bf16):
            Y, Ho = bf16_emulation(X, H0, W, R, B, state_bf16)
            return Ho, (Y if sequence else None)

        modes.append((name, emulate, ""))
    return modes


def measure_accuracy(states, log):
    """Records of the sequence errors and the one-step errors of every mode."""
    import torch

    torch.set_num_threads(THREADS)
    sequence_records, step_records = [], []
    for inputs, hidden in ACCURACY_SIZES:
        torch.manual_seed(SEED)
        module = torch.nn.GRU(inputs, hidden, batch_first=True).eval()  # torch's default initialisation
        state = {k: v.detach().numpy() for k, v in module.state_dict().items()}
        W, R, B = openvino_arrays(state, np.float32)
        W64, R64, B64 = openvino_arrays(state, np.float64)
        check = fastgru.from_torch(module).layers[0]
        mine = fastgru_op("gru_sequence", W, R, B, True, None)
        rng = np.random.default_rng(SEED)
        for batch in ACCURACY_BATCHES:
            X = rng.standard_normal((batch, STEPS, inputs), dtype=np.float32)
            H0 = np.zeros((batch, 1, hidden), np.float32)
            same = all(np.array_equal(a, b) for a, b in zip(check(X, H0, None), mine(X, H0, None)))
            if not same:
                raise AssertionError("fastgru.from_torch and this script's conversion disagree")
            Y64, Ho64 = reference.gru_sequence(
                X.astype(np.float64), H0.astype(np.float64), [STEPS] * batch, W64, R64, B64, linear_before_reset=True
            )
            ov_case = case_of(Shape("gru_sequence", batch, STEPS, inputs, hidden, lbr=True), X, H0, W, R, B)
            for mode, compute, how in accuracy_modes(module, W, R, B, ov_case, sequence=True):
                record = {"inputs": inputs, "hidden": hidden, "batch": batch, "steps": STEPS, "mode": mode}
                if isinstance(compute, Exception):
                    record.update(available=False, reason=str(compute))
                    log(f"i{inputs} h{hidden} b{batch:<3d} {mode:40s} not available: {compute}")
                else:
                    record.update(available=True, built_with=how, **_errors(compute(X, H0), (Ho64, Y64)))
                    log(f"i{inputs} h{hidden} b{batch:<3d} {mode:40s} Ho {record['Ho']:.2e}  Y {record['Y']:.2e}")
                sequence_records.append(record)
        # one step: GRUCell over `states` random rows
        Xs = rng.standard_normal((states, 1, inputs), dtype=np.float32)
        Hs = rng.uniform(-1, 1, (states, 1, hidden)).astype(np.float32)
        exact = reference.gru_cell(
            Xs[:, 0].astype(np.float64),
            Hs[:, 0].astype(np.float64),
            W64[0],
            R64[0],
            B64[0],
            linear_before_reset=True,
        )[:, None]
        ov_case = case_of(Shape("gru_cell", states, 1, inputs, hidden, lbr=True), Xs, Hs, W, R, B)
        for mode, compute, _ in accuracy_modes(module, W, R, B, ov_case, sequence=False):
            record = {"inputs": inputs, "hidden": hidden, "rows": states, "mode": mode}
            if isinstance(compute, Exception):
                record.update(available=False, reason=str(compute))
                log(f"i{inputs} h{hidden} step {mode:40s} not available: {compute}")
            else:
                record.update(available=True, Ho=_errors(compute(Xs, Hs)[:1], (exact,))["Ho"])
                log(f"i{inputs} h{hidden} step {mode:40s} Ho {record['Ho']:.2e}")
            step_records.append(record)
    return sequence_records, step_records


# ------------------------------------------------------------------------------------------- report


def machine(quick):
    info = machine_info()
    info["date"] = time.strftime("%Y-%m-%d")
    info["quick"] = quick
    info["FASTGRU_SPIN_US"] = os.environ.get("FASTGRU_SPIN_US", "unset (1000)")
    try:
        flags = set(next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if ln.startswith("flags")).split())
    except (OSError, StopIteration):
        flags = set()
    info["cpu_bf16_int8_flags"] = sorted(flags & {"avx512_bf16", "amx_bf16", "amx_int8", "avx512_vnni", "avx_vnni"})
    try:
        import openvino as ov

        info["openvino_cpu_capabilities"] = list(ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))
    except Exception as exc:  # noqa: BLE001 - a fact of the machine, whatever went wrong
        info["openvino_cpu_capabilities"] = f"unknown ({type(exc).__name__})"
    return info


def _torch_warnings():
    try:
        module = torch_gru_module(Case(Shape("gru_sequence", 1, 1, 4, 4, lbr=True)))[0]
        return torch_dynamic_int8(module)[1]
    except Unavailable as exc:
        return [f"not available: {exc}"]


def _fmt(value, digits=1):
    return "n/a" if value is None else f"{value:,.{digits}f}"


def markdown(data):
    m, speed = data["machine"], data["speed"]
    chosen = sorted({r["openvino_precision"] for r in speed if r.get("openvino_precision")})
    lines = ["# Weight dtypes: speed and accuracy", ""]
    if m["quick"]:
        lines += ["**Quick run (`--quick`): a smoke test, not numbers to quote.**", ""]
    lines += [
        f"{m['cpu']} ({m['isa']}, LLVM cpu {m['cpu_name']}; bf16/int8 flags: "
        f"{', '.join(m['cpu_bf16_int8_flags']) or 'none'}), {m['cores']} cores; fastgru {m['fastgru']} "
        f"(geometry {m['geometry']} compiled for {m['compiled_for']}, {m['numba_threads']} Numba threads, "
        f"layer {m.get('numba_threading_layer', '?')}), Numba "
        f"{m['numba']}, NumPy {m['numpy']}, torch {m.get('torch', '?')}, ONNX Runtime {m.get('onnxruntime', '?')}, "
        f"OpenVINO {m.get('openvino', '?')} (CPU capabilities {m['openvino_cpu_capabilities']}); peers on "
        f"{m['peer_threads']} threads; OPENBLAS_CORETYPE {m['OPENBLAS_CORETYPE']}, FASTGRU_SPIN_US "
        f"{m['FASTGRU_SPIN_US']}; {m['date']}.",
        "",
        f"OpenVINO's default precision here: {', '.join(chosen) or 'not measured'}. {BF16_NOTE}; elsewhere "
        "its default is f32, the same computation as the f32 hint.",
        "",
        "## Speed",
        "",
        f"µs per call, the median of {data['rounds']} interleaved rounds of {data['seconds']} s; float32 inputs, "
        "outputs and states everywhere; ratio = µs / fastgru float32's µs (above 1: slower than fastgru float32).",
        "",
        "| shape | implementation | weights | µs | / fastgru float32 |",
        "|---|---|---|---|---|",
    ]
    for r in speed:
        if r["available"]:
            lines.append(
                f"| {r['shape']} | {r['implementation']} | {r['weights']} | {_fmt(r['us'])} "
                f"| {_fmt(r['ratio_to_fastgru_float32'], 2)} |"
            )
        else:
            lines.append(f"| {r['shape']} | {r['implementation']} | {r['weights']} | not available | |")
    lines += [
        "",
        f"`{TORCH_INT8}`: `torch.ao.quantization.quantize_dynamic(model, {{nn.GRU}}, dtype=torch.qint8)`, "
        "weights int8 per tensor and every product's inputs quantized to 8 bits per call: another "
        "computation than the others (see its errors below). It warns: "
        + "; ".join(f"“{w}”" for w in data["torch_quantize_dynamic_warnings"])
        + ".",
        "",
        "## Accuracy: 100 steps",
        "",
        "torch.nn.GRU with torch's default initialisation (seed 0), X ~ N(0, 1), h0 zero, "
        "linear_before_reset=True; max absolute error against `fastgru.reference.gru_sequence` in float64 "
        "on the same float32 weights. The bf16 emulations are NumPy, not OpenVINO: W, R, X and the state "
        "fed to each step's products rounded to bfloat16 (nearest, ties to even), float32 accumulation; "
        "the state carried in float32, or stored in bfloat16 after each step (`bf16 state`).",
        "",
        "| shape | batch | mode | max abs error Ho | max abs error Y |",
        "|---|---|---|---|---|",
    ]
    for r in data["accuracy_sequence"]:
        shape = f"i{r['inputs']} h{r['hidden']}"
        if r["available"]:
            lines.append(f"| {shape} | {r['batch']} | {r['mode']} | {r['Ho']:.2e} | {r['Y']:.2e} |")
        else:
            lines.append(f"| {shape} | {r['batch']} | {r['mode']} | not available | |")
    rows = data["accuracy_step"][0]["rows"] if data["accuracy_step"] else 0
    lines += [
        "",
        "## Accuracy: one step",
        "",
        f"GRUCell (linear_before_reset=True), {rows} random rows: X ~ N(0, 1), states uniform in [-1, 1]; "
        "max absolute error of Ho against `fastgru.reference.gru_cell` in float64.",
        "",
        "| shape | mode | max abs error Ho |",
        "|---|---|---|",
    ]
    for r in data["accuracy_step"]:
        shape = f"i{r['inputs']} h{r['hidden']}"
        error = f"{r['Ho']:.2e}" if r["available"] else "not available"
        lines.append(f"| {shape} | {r['mode']} | {error} |")
    return "\n".join(lines) + "\n"


def readme_table(data):
    """The README's tables: speed per shape (µs, and / fastgru float32), then the 100-step errors."""
    m = data["machine"]
    speed = {}
    for r in data["speed"]:
        if r["available"]:
            name = "OpenVINO default" if r["implementation"].startswith("OpenVINO default") else r["implementation"]
            speed.setdefault(r["shape"], {})[name] = r
    default = next(  # "OpenVINO default (bf16)" or "(f32)": the precision the plugin chose
        (r["implementation"] for r in data["speed"] if r["implementation"].startswith("OpenVINO default (")),
        "OpenVINO default",
    )
    columns = ["fastgru float32", "fastgru bfloat16", "fastgru int8", "torch float32", TORCH_INT8, "OpenVINO f32"]
    columns.append("OpenVINO default")
    lines = [
        "| shape | " + " | ".join(f"{default if c == 'OpenVINO default' else c} µs" for c in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for shape, rows in speed.items():
        cells = []
        for c in columns:
            row = rows.get(c)
            if row is None:
                cells.append("–")
            elif c == "fastgru float32":
                cells.append(_fmt(row["us"]))
            else:
                cells.append(f"{_fmt(row['us'])} ({_fmt(row['ratio_to_fastgru_float32'], 2)})")
        lines.append(f"| {shape} | " + " | ".join(cells) + " |")
    modes = ["fastgru float32", "fastgru bfloat16", "fastgru int8", TORCH_INT8, default]
    modes.append("bf16 emulation (NumPy, not OpenVINO)")
    errors = {}
    for r in data["accuracy_sequence"]:
        if r["available"] and r["mode"] in modes:
            errors.setdefault((r["inputs"], r["hidden"], r["batch"]), {})[r["mode"]] = r["Ho"]
    lines += ["", "| 100 steps, max abs error of Ho | " + " | ".join(modes) + " |", "|---|" + "---|" * len(modes)]
    for (inputs, hidden, batch), by_mode in errors.items():
        cells = [f"{by_mode[mode]:.1e}" if mode in by_mode else "–" for mode in modes]
        lines.append(f"| i{inputs} h{hidden} batch {batch} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"{m['cpu']} ({m['isa']}, geometry {m['geometry']} compiled for {m['compiled_for']}), {m['numba_threads']} "
        f"threads; torch {m.get('torch', '?')} and OpenVINO {m.get('openvino', '?')} on {m['peer_threads']} threads; "
        "float32 inputs, outputs and states; µs per call (medians; in parentheses / fastgru float32); errors against "
        f"float64 on the float32 weights; OPENBLAS_CORETYPE {m['OPENBLAS_CORETYPE']}; {m['date']}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.1, help="time per row per round")
    parser.add_argument("--states", type=int, default=1000, help="random rows of the one-step errors")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 0.01 s, 200 rows: a smoke run")
    parser.add_argument(
        "--out", help="writes PREFIX.md and PREFIX.json; default benchmarks/results/<cpu>/weight_dtypes_results"
    )
    parser.add_argument("--readme", help="also put the summary tables between the README's weight-dtypes markers")
    parser.add_argument("--report", action="store_true", help="only rewrite PREFIX.md (and --readme) from PREFIX.json")
    args = parser.parse_args(argv)
    args.out = args.out or str(results_dir() / "weight_dtypes_results")
    if args.quick:
        args.rounds, args.seconds, args.states = 2, 0.01, 200
    try:
        import onnxruntime  # noqa: F401  (its version in the machine facts)
    except ImportError:
        pass

    def log(text):
        print(text, flush=True)

    if args.report:
        data = json.loads(Path(f"{args.out}.json").read_text())
        _write(data, args)
        return
    sequence_records, step_records = measure_accuracy(args.states, log)
    speed = measure_speed(args.rounds, args.seconds, log)
    data = {
        "machine": machine(args.quick),
        "rounds": args.rounds,
        "seconds": args.seconds,
        "torch_quantize_dynamic_warnings": _torch_warnings(),
        "speed": speed,
        "accuracy_sequence": sequence_records,
        "accuracy_step": step_records,
    }
    Path(f"{args.out}.json").write_text(json.dumps(data, indent=1) + "\n")
    _write(data, args)


def _write(data, args):
    text = markdown(data)
    Path(f"{args.out}.md").write_text(text)
    print(text)
    table = readme_table(data)
    Path(f"{args.out}_table.md").write_text(table)
    if args.readme:
        from report import replace_table

        replace_table(args.readme, "weight-dtypes", table)


if __name__ == "__main__":
    main()
