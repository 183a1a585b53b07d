"""The implementations the benchmarks time, each built outside the timer into a zero-argument call.

Every builder takes a ``Case`` and returns ``(run, result)``: ``run()`` is what the benchmark times
(inputs already in the implementation's own layout and types, weights already loaded), and
``result()`` runs once more and returns (Y, Ho) in fastgru's layout (Ho alone for the cell), for
the one correctness check per shape. A builder raises ``Unavailable`` when its runtime is not
installed or does not implement the case.
"""

import numpy as np

import fastgru
from fastgru.benchmark import Shape  # noqa: F401 - the shapes' type, for the benchmarks


class Unavailable(Exception):
    """This implementation cannot run this case here."""


class Case:
    """Random float32 inputs of a shape, in OpenVINO's layout (weights uniform in ±1/sqrt(H)): the
    data of ``fastgru.benchmark``'s suites (``Shape.draw``), so that every table times the same values."""

    def __init__(self, shape, seed=0):
        self.shape = shape
        drawn = shape.draw(seed)
        self.X, self.H0, self.lengths = drawn["X"], drawn["H0"], drawn["lengths"]
        self.W, self.R, self.B, self.A = drawn["W"], drawn["R"], drawn["B"], drawn["A"]

    @property
    def attrs(self):
        return {"direction": self.shape.direction, "linear_before_reset": self.shape.lbr}


# ----------------------------------------------------------------------------------------------- fastgru


def fastgru_function(case):
    c, op = case, case.shape.op
    if op == "gru_cell":
        args = (c.X[:, 0], c.H0[:, 0], c.W[0], c.R[0], c.B[0])
        run = lambda: fastgru.gru_cell(*args, linear_before_reset=c.shape.lbr)  # noqa: E731
    elif op == "augru_sequence":
        args = (c.X, c.H0, c.lengths, c.W, c.R, c.B, c.A)
        run = lambda: fastgru.augru_sequence(*args)  # noqa: E731
    else:
        args = (c.X, c.H0, c.lengths, c.W, c.R, c.B)
        run = lambda: fastgru.gru_sequence(*args, **c.attrs)  # noqa: E731
    return run, run


def fastgru_prepared(case, weight_dtype=None):
    """The serving form: weights packed once (stored as ``weight_dtype``), outputs preallocated (out=)."""
    c, op, compact = case, case.shape.op, {"weight_dtype": weight_dtype} if weight_dtype else {}
    name = {"gru_cell": "GRUCell", "augru_sequence": "AUGRUSequence"}.get(op, "GRUSequence")
    if not hasattr(fastgru, name):
        raise Unavailable(f"this fastgru has no prepared op fastgru.{name}")
    if op == "gru_cell":
        cell = fastgru.GRUCell(c.W[0], c.R[0], c.B[0], linear_before_reset=c.shape.lbr, **compact)
        x, h0 = c.X[:, 0], c.H0[:, 0]
        out = np.empty_like(h0)
        return (lambda: cell(x, h0, out=out)), (lambda: cell(x, h0))
    if op == "augru_sequence":
        augru = fastgru.AUGRUSequence(c.W, c.R, c.B, **compact)
        out = (np.empty((c.shape.batch, 1, c.shape.seq, c.shape.hidden), np.float32), np.empty_like(c.H0))
        return (lambda: augru(c.X, c.H0, c.lengths, c.A, out=out)), (lambda: augru(c.X, c.H0, c.lengths, c.A))
    seq = fastgru.GRUSequence(c.W, c.R, c.B, **c.attrs, **compact)
    d = c.shape.directions
    out = (np.empty((c.shape.batch, d, c.shape.seq, c.shape.hidden), np.float32), np.empty_like(c.H0))
    return (lambda: seq(c.X, c.H0, c.lengths, out=out)), (lambda: seq(c.X, c.H0, c.lengths))


# --------------------------------------------------------------------------------------------- NumPy


def numpy_reference(case):
    try:
        import reference  # tests/reference.py, put on sys.path by benchmarks/conftest.py
    except ImportError as exc:
        raise Unavailable("tests/reference.py is not importable") from exc
    c = case

    def run():
        if c.shape.op == "gru_cell":
            return reference.gru_cell(c.X[:, 0], c.H0[:, 0], c.W[0], c.R[0], c.B[0], linear_before_reset=c.shape.lbr)
        if c.shape.op == "augru_sequence":
            return reference.augru_sequence(c.X, c.H0, c.lengths, c.W, c.R, c.B, c.A)
        return reference.gru_sequence(c.X, c.H0, c.lengths, c.W, c.R, c.B, **c.attrs)

    return run, run


# ------------------------------------------------------------------------------------------ OpenVINO

THREADS = 2


def openvino_cpu(case):
    """OpenVINO's CPU plugin, f32 precision hint, weights and sequence_lengths as Constants (its
    fast oneDNN path), one infer request reused, inputs shared without copies."""
    run, result, _ = openvino_compiled(case, {"INFERENCE_PRECISION_HINT": "f32"})
    return run, result


# -------------------------------------------------------------------------------------- ONNX Runtime


def _onnxruntime_session(case):
    """(session, feed) of one ONNX GRU node (gate order z, r, h as OpenVINO), layout 0: X (S, N, I),
    Y (S, D, N, H); weights and sequence_lens as initializers."""
    try:
        import onnxruntime  # noqa: F401  (onnxruntime_session's)
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:
        raise Unavailable("onnx or onnxruntime is not installed") from exc
    c, shape = case, case.shape
    if shape.op == "augru_sequence":
        raise Unavailable("ONNX has no AUGRU")
    n, s, i, h, d = shape.batch, _steps(shape), shape.inputs, shape.hidden, shape.directions
    # ONNX B = [Wb | Rb]: OpenVINO's summed biases go in Wb; for linear_before_reset Rbh goes in Rb.
    wb = c.B[:, : 3 * h]
    rb = np.zeros_like(wb)
    if shape.lbr:
        rb[:, 2 * h :] = c.B[:, 3 * h :]
    initializers = [
        numpy_helper.from_array(c.W, "W"),
        numpy_helper.from_array(c.R, "R"),
        numpy_helper.from_array(np.concatenate([wb, rb], axis=1), "B"),
        numpy_helper.from_array(np.full(n, s, np.int32), "sequence_lens"),
    ]
    node = helper.make_node(
        "GRU",
        ["X", "W", "R", "B", "sequence_lens", "initial_h"],
        ["Y", "Y_h"],
        hidden_size=h,
        direction=shape.direction,
        linear_before_reset=int(shape.lbr),
    )
    graph = helper.make_graph(
        [node],
        "gru",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [s, n, i]),
            helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, [d, n, h]),
        ],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [s, d, n, h]),
            helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [d, n, h]),
        ],
        initializers,
    )
    session = onnxruntime_session(graph)
    feed = {
        "X": np.ascontiguousarray(c.X[:, :s].transpose(1, 0, 2)),
        "initial_h": np.ascontiguousarray(c.H0.transpose(1, 0, 2)),
    }
    return session, feed


#: Whether ONNX Runtime's intra-op workers spin between calls (its default; False sets its session
#: option ``session.intra_op.allow_spinning`` to 0: benchmarks/peer_spinning.py).
ORT_SPINNING = True


def onnxruntime_session(graph):
    """An ONNX Runtime session of ``graph`` (opset 14), checked, on THREADS intra-op threads."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    if not ORT_SPINNING:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _steps(shape):
    """The ONNX sequence length: one step for the cell."""
    return 1 if shape.op == "gru_cell" else shape.seq


def _from_onnx_layout(shape, Y, Yh):
    """fastgru's (Y, Ho), or (Ho,) of the cell, from ONNX Runtime's layout-0 outputs."""
    Y, Ho = Y.transpose(2, 1, 0, 3), Yh.transpose(1, 0, 2)
    return (Ho[:, 0],) if shape.op == "gru_cell" else (Y, Ho)


def onnxruntime_gru(case):
    """ONNX Runtime as a server runs it: inputs bound once, outputs bound to preallocated arrays
    (IOBinding), each call ``session.run_with_iobinding``, as fastgru's ``out=`` and OpenVINO's
    shared outputs do."""
    session, feed = _onnxruntime_session(case)
    shape = case.shape
    n, s, h, d = shape.batch, _steps(shape), shape.hidden, shape.directions
    Y, Yh = np.empty((s, d, n, h), np.float32), np.empty((d, n, h), np.float32)
    binding = session.io_binding()
    for name, value in feed.items():
        binding.bind_cpu_input(name, value)  # no copy: run keeps feed alive
    for name, value in (("Y", Y), ("Y_h", Yh)):
        binding.bind_output(name, "cpu", 0, np.float32, list(value.shape), value.ctypes.data)

    def run(bound=(feed, Y, Yh)):  # ONNX Runtime reads and writes these: alive as long as run is
        session.run_with_iobinding(binding)

    def result():
        Y.fill(np.nan)  # the outputs must come from this call
        Yh.fill(np.nan)
        run()
        return _from_onnx_layout(shape, Y.copy(), Yh.copy())

    return run, result


def onnxruntime_run(case):
    """ONNX Runtime's plain ``session.run(None, feed)``: inputs passed and outputs allocated on
    every call."""
    session, feed = _onnxruntime_session(case)

    def run():
        return session.run(None, feed)

    return run, lambda: _from_onnx_layout(case.shape, *run())


# --------------------------------------------------------------------------------------------- torch


def torch_gru(case):
    """torch.nn.GRU / GRUCell: gate order r, z, n and linear_before_reset semantics only."""
    c, shape = case, case.shape
    if not shape.lbr:
        raise Unavailable("torch computes linear_before_reset=True only")
    if shape.op == "augru_sequence":
        raise Unavailable("torch has no AUGRU")
    try:
        import torch
    except ImportError as exc:
        raise Unavailable("torch is not installed") from exc
    torch.set_num_threads(THREADS)
    h, d = shape.hidden, shape.directions

    def rzh(m):  # OpenVINO's rows z, r, h -> torch's r, z, n
        return np.concatenate([m[h : 2 * h], m[:h], m[2 * h : 3 * h]])

    def load(module, suffix, k):
        b_ih = rzh(c.B[k, : 3 * h])  # [Bz, Br, Wbh] reordered; Rbh alone goes in b_hh
        b_hh = np.concatenate([np.zeros(2 * h, np.float32), c.B[k, 3 * h :]])
        for name, value in (
            ("weight_ih", rzh(c.W[k])),
            ("weight_hh", rzh(c.R[k])),
            ("bias_ih", b_ih),
            ("bias_hh", b_hh),
        ):
            getattr(module, name + suffix).data = torch.from_numpy(np.ascontiguousarray(value))

    with torch.inference_mode():
        if shape.op == "gru_cell":
            module = torch.nn.GRUCell(shape.inputs, h)
            load(module, "", 0)
            x, h0 = (
                torch.from_numpy(np.ascontiguousarray(c.X[:, 0])),
                torch.from_numpy(np.ascontiguousarray(c.H0[:, 0])),
            )

            def run():
                with torch.inference_mode():
                    return module(x, h0)

            return run, lambda: (run().numpy(),)
        module = torch.nn.GRU(shape.inputs, h, batch_first=True, bidirectional=d == 2)
        load(module, "_l0", 0)
        if d == 2:
            load(module, "_l0_reverse", 1)
        if shape.direction == "reverse":
            raise Unavailable("torch has no reverse-only GRU")
        x, h0 = torch.from_numpy(c.X), torch.from_numpy(np.ascontiguousarray(c.H0.transpose(1, 0, 2)))

    def run():
        with torch.inference_mode():
            return module(x, h0)

    def result():
        Y, Hn = run()
        n, s = shape.batch, shape.seq
        return Y.numpy().reshape(n, s, d, h).transpose(0, 2, 1, 3), Hn.numpy().transpose(1, 0, 2)

    return run, result


IMPLS = {
    "fastgru": fastgru_function,
    "fastgru_prepared": fastgru_prepared,
    "openvino": openvino_cpu,
    "onnxruntime": onnxruntime_gru,
    "onnxruntime_run": onnxruntime_run,
    "torch": torch_gru,
    "numpy": numpy_reference,
}
#: The peers, each variant a row of its own; the report's ratio is against the fastest of them.
PEERS = ("openvino", "onnxruntime", "onnxruntime_run", "torch")


# ------------------------------------------------- reduced precision (benchmarks/weight_dtypes.py)


def case_of(shape, X, H0, W, R, B, A=None, lengths=None):
    """A ``Case`` of ``shape`` holding the given float32 arrays instead of ``shape.draw``'s (OpenVINO's
    sequence layout whatever the op: X (N, S, I), H0 (N, D, H), W (D, 3H, I), R (D, 3H, H), B (D, 3H
    or 4H), A (N, S, 1); the cell's S and D are 1); lengths default to S for every row."""
    case = Case.__new__(Case)
    case.shape = shape
    case.X, case.H0, case.W, case.R, case.B = (np.ascontiguousarray(a, np.float32) for a in (X, H0, W, R, B))
    case.A = None if A is None else np.ascontiguousarray(A, np.float32)
    n, s = case.X.shape[0], case.X.shape[1]
    case.lengths = np.full(n, s, np.int32) if lengths is None else np.asarray(lengths, np.int32)
    return case


def openvino_compiled(case, config):
    """A one-op model of ``case`` (weights and sequence_lengths as Constants, one infer request
    reused, inputs shared) compiled with ``config`` (INFERENCE_NUM_THREADS is THREADS unless config
    sets it; ``openvino_cpu`` gives the f32 hint): ``(run, result, precision)``, with
    ``precision`` the compiled model's INFERENCE_PRECISION_HINT, the precision OpenVINO chose (e.g.
    "f32"; "bf16" only on CPUs with AVX512_BF16 or AMX)."""
    try:
        import openvino as ov
        from openvino import opset15 as ops
    except ImportError as exc:
        raise Unavailable("openvino is not installed") from exc
    c, shape = case, case.shape
    config = {"INFERENCE_NUM_THREADS": THREADS, **config}
    if shape.op == "augru_sequence":
        try:
            import openvino_oracle  # tests/openvino_oracle.py: an IR of OpenVINO's internal AUGRUSequence
        except ImportError as exc:
            raise Unavailable("tests/openvino_oracle.py is not importable") from exc
        xml, blob = openvino_oracle.augru_ir(c.X, c.H0, c.lengths, c.W, c.R, c.B, c.A)
        ov_core = openvino_oracle.augru_core()
        model = ov_core.read_model(model=xml, weights=ov.Tensor(np.frombuffer(blob, dtype=np.uint8).copy()))
        inputs = [c.X, c.H0, c.A]
    elif shape.op == "gru_cell":
        ov_core = ov.Core()
        x = ops.parameter([shape.batch, shape.inputs], np.float32)
        h = ops.parameter([shape.batch, shape.hidden], np.float32)
        node = ops.gru_cell(
            x,
            h,
            ops.constant(c.W[0]),
            ops.constant(c.R[0]),
            ops.constant(c.B[0]),
            shape.hidden,
            linear_before_reset=shape.lbr,
        )
        model = ov.Model(node.outputs(), [x, h])
        inputs = [np.ascontiguousarray(c.X[:, 0]), np.ascontiguousarray(c.H0[:, 0])]
    else:
        ov_core = ov.Core()
        x = ops.parameter(list(c.X.shape), np.float32)
        h = ops.parameter(list(c.H0.shape), np.float32)
        node = ops.gru_sequence(
            x,
            h,
            ops.constant(c.lengths),
            ops.constant(c.W),
            ops.constant(c.R),
            ops.constant(c.B),
            shape.hidden,
            shape.direction,
            linear_before_reset=shape.lbr,
        )
        model = ov.Model(node.outputs(), [x, h])
        inputs = [c.X, c.H0]
    compiled = ov_core.compile_model(model, "CPU", config)
    chosen = compiled.get_property("INFERENCE_PRECISION_HINT")  # an openvino.Type
    precision = chosen.get_type_name() if hasattr(chosen, "get_type_name") else str(chosen)
    request = compiled.create_infer_request()

    def run():
        return request.infer(inputs, share_inputs=True, share_outputs=True)

    def result():
        outputs = run()
        return tuple(np.array(outputs[i]) for i in range(len(outputs)))

    return run, result, precision


def torch_gru_module(case):
    """``(module, x, h0)``: a ``torch.nn.GRU`` (batch_first, eval mode) holding ``case``'s weights
    (OpenVINO's gate rows z, r, h and fused biases as torch's r, z, n, b_ih and b_hh, as ``torch_gru``
    loads them), and case's X and H0 as torch tensors of its layout. Forward, linear_before_reset only."""
    c, shape = case, case.shape
    if not shape.lbr or shape.op == "augru_sequence" or shape.direction != "forward":
        raise Unavailable("torch computes forward GRUs with linear_before_reset=True only")
    try:
        import torch
    except ImportError as exc:
        raise Unavailable("torch is not installed") from exc
    h = shape.hidden

    def rzh(m):  # OpenVINO's rows z, r, h -> torch's r, z, n
        return np.concatenate([m[h : 2 * h], m[:h], m[2 * h : 3 * h]])

    module = torch.nn.GRU(shape.inputs, h, batch_first=True).eval()
    values = {
        "weight_ih_l0": rzh(c.W[0]),
        "weight_hh_l0": rzh(c.R[0]),
        "bias_ih_l0": rzh(c.B[0, : 3 * h]),  # [Bz, Br, Wbh] reordered; Rbh alone goes in b_hh
        "bias_hh_l0": np.concatenate([np.zeros(2 * h, np.float32), c.B[0, 3 * h :]]),
    }
    with torch.no_grad():
        for name, value in values.items():
            getattr(module, name).copy_(torch.from_numpy(np.ascontiguousarray(value)))
    x = torch.from_numpy(np.ascontiguousarray(c.X))
    h0 = torch.from_numpy(np.ascontiguousarray(c.H0.transpose(1, 0, 2)))
    return module, x, h0


def torch_dynamic_int8(module):
    """``(quantized, warnings)``: ``torch.ao.quantization.quantize_dynamic`` of a ``torch.nn.GRU``
    with ``{nn.GRU}`` and qint8 (weights int8 per tensor, activations quantized to 8 bits per call:
    not exact), and the messages of the warnings it raised (its deprecation), which are not shown.

    quantize_dynamic swaps only a module's children: an nn.GRU passed itself comes back unchanged, a
    float GRU. It is therefore quantized inside a container, and the swap checked."""
    import warnings

    import torch

    holder = torch.nn.Sequential(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quantized = torch.ao.quantization.quantize_dynamic(holder, {torch.nn.GRU}, dtype=torch.qint8)[0]
    if type(quantized) is type(module):
        raise Unavailable("quantize_dynamic left the torch.nn.GRU unquantized")
    messages = sorted({f"{w.category.__name__}: {str(w.message).strip().splitlines()[0].strip()}" for w in caught})
    return quantized.eval(), messages
