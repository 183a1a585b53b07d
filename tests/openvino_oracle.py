"""Run one GRU case through OpenVINO itself, to check fastgru against it (docs/semantics.md,
"Where fastgru differs from OpenVINO").

Each helper builds a one-operator OpenVINO model for the given arrays (data as Parameters, weights
as Constants), compiles it for "CPU" with an f32 inference precision hint (this CPU's default is
bf16, with errors around 4e-3) and returns NumPy arrays of the dtype of the inputs.

Arrays may be float16, float32, float64 or ``ml_dtypes.bfloat16``. OpenVINO's Python bindings
cannot convert bfloat16 NumPy arrays, so those travel as their raw 16-bit patterns in tensors of
element type bf16. OpenVINO computes float64 models in float32.

openvino is imported lazily, so that this module can be imported (and collected by
``--doctest-modules``) where openvino is not installed.
"""

import functools
import math
import os

import numpy as np

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes is a test dependency
    ml_dtypes = None

CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}


def _ov():
    import openvino

    return openvino


@functools.lru_cache(maxsize=None)
def core():
    """The process's one ``openvino.Core``."""
    return _ov().Core()


@functools.lru_cache(maxsize=None)
def augru_core():
    """A ``Core`` that knows ``ie_internal_opset.AUGRUSequence``, taken from the CPU plugin's extensions.

    A Core of its own, so that the GRU models above are compiled by a Core in its default state.
    """
    ov = _ov()
    c = ov.Core()
    c.add_extension(cpu_plugin_library())
    return c


def cpu_plugin_library():
    """Path of the CPU plugin shared library shipped in the openvino wheel."""
    libs = os.path.join(os.path.dirname(_ov().__file__), "libs")
    for name in sorted(os.listdir(libs)):
        if name.startswith("libopenvino_intel_cpu_plugin") and ".so" in name:
            return os.path.join(libs, name)
    raise FileNotFoundError(f"no libopenvino_intel_cpu_plugin.so in {libs}")


def _is_bf16(dtype):
    return ml_dtypes is not None and np.dtype(dtype) == np.dtype(ml_dtypes.bfloat16)


def element_type(dtype):
    """The OpenVINO element type of a NumPy dtype."""
    ov = _ov()
    dtype = np.dtype(dtype)
    if _is_bf16(dtype):
        return ov.Type.bf16
    return {
        np.dtype(np.float16): ov.Type.f16,
        np.dtype(np.float32): ov.Type.f32,
        np.dtype(np.float64): ov.Type.f64,
        np.dtype(np.int32): ov.Type.i32,
        np.dtype(np.int64): ov.Type.i64,
    }[dtype]


def to_tensor(array):
    """An ``openvino.Tensor`` holding a copy of ``array`` (bfloat16 included)."""
    ov = _ov()
    array = np.ascontiguousarray(array)
    if _is_bf16(array.dtype):
        tensor = ov.Tensor(ov.Type.bf16, ov.Shape(list(array.shape)))
        # The bindings show bf16 tensor memory as a float16 array: write the bit patterns.
        tensor.data.view(np.uint16)[...] = array.view(np.uint16)
        return tensor
    return ov.Tensor(array.copy())


def from_tensor(tensor, dtype):
    """A NumPy copy of an output tensor, as ``dtype``."""
    if _is_bf16(dtype):
        return tensor.data.view(np.uint16).view(ml_dtypes.bfloat16).copy()
    out = np.array(tensor.data, copy=True)
    assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    return out


def _constant(array):
    from openvino import opset15 as ops

    return ops.constant(to_tensor(array))


def _run(model, inputs, dtype, ov_core=None):
    compiled = (ov_core or core()).compile_model(model, "CPU", CONFIG)
    request = compiled.create_infer_request()
    request.infer({i: to_tensor(a) for i, a in enumerate(inputs)})
    return tuple(from_tensor(request.get_output_tensor(i), dtype) for i in range(len(compiled.outputs)))


def gru_cell(
    X, initial_hidden_state, W, R, B=None, *, activations=("sigmoid", "tanh"), clip=math.inf, linear_before_reset=False
):
    """Ho of OpenVINO's GRUCell-3 (opset15.gru_cell). B=None runs with a zero bias of the right size."""
    ov = _ov()
    from openvino import opset15 as ops

    X, H = np.asarray(X), np.asarray(initial_hidden_state)
    dtype = X.dtype
    hidden_size = H.shape[-1]
    if B is None:  # the Python factory requires B; GRUCell-3's default is zeros of G*hidden_size
        B = np.zeros((4 if linear_before_reset else 3) * hidden_size, dtype=dtype)
    px = ops.parameter(list(X.shape), element_type(dtype), name="X")
    ph = ops.parameter(list(H.shape), element_type(dtype), name="initial_hidden_state")
    node = ops.gru_cell(
        px,
        ph,
        _constant(W),
        _constant(R),
        _constant(B),
        hidden_size,
        activations=list(activations),
        clip=float(clip),
        linear_before_reset=linear_before_reset,
    )
    model = ov.Model(node.outputs(), [px, ph], "gru_cell")
    (Ho,) = _run(model, [X, H], dtype)
    return Ho


def gru_sequence(
    X,
    initial_hidden_state,
    sequence_lengths,
    W,
    R,
    B,
    *,
    direction="forward",
    activations=("sigmoid", "tanh"),
    clip=math.inf,
    linear_before_reset=False,
):
    """(Y, Ho) of OpenVINO's GRUSequence-5 (opset15.gru_sequence); sequence_lengths is a Parameter."""
    ov = _ov()
    from openvino import opset15 as ops

    X, H = np.asarray(X), np.asarray(initial_hidden_state)
    L = np.asarray(sequence_lengths)
    if L.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        L = L.astype(np.int64)
    dtype = X.dtype
    hidden_size = H.shape[-1]
    px = ops.parameter(list(X.shape), element_type(dtype), name="X")
    ph = ops.parameter(list(H.shape), element_type(dtype), name="initial_hidden_state")
    pl = ops.parameter(list(L.shape), element_type(L.dtype), name="sequence_lengths")
    node = ops.gru_sequence(
        px,
        ph,
        pl,
        _constant(W),
        _constant(R),
        _constant(B),
        hidden_size,
        direction,
        activations=list(activations),
        clip=float(clip),
        linear_before_reset=linear_before_reset,
    )
    model = ov.Model(node.outputs(), [px, ph, pl], "gru_sequence")
    return _run(model, [X, H, L], dtype)


# --- AUGRUSequence: an IR written by hand, read by a Core that has the CPU plugin's extensions ------

_PRECISION = {"f16": "FP16", "f32": "FP32", "f64": "FP64", "bf16": "BF16", "i32": "I32"}


def _port(port_id, shape, et, names=None):
    attr = f' names="{names}"' if names else ""
    dims = "".join(f"<dim>{d}</dim>" for d in shape)
    return f'<port id="{port_id}" precision="{_PRECISION[et]}"{attr}>{dims}</port>'


def augru_ir(X, initial_hidden_state, sequence_lengths, W, R, B, A):
    """IR v11 (xml text, weights bytes) of one ``AUGRUSequence`` (ie_internal_opset), OpenVINO layout.

    Layers: Parameters X, initial_hidden_state and A; Constants sequence_lengths (i32), W, R, B;
    attributes as ov::op::internal::AUGRUSequence visits them (its only valid values).
    """
    X, H, A = np.asarray(X), np.asarray(initial_hidden_state), np.asarray(A)
    et = element_type(X.dtype).get_type_name()
    N, S, _ = X.shape
    hidden_size = H.shape[-1]
    layers, blob = [], bytearray()

    def parameter(lid, name, array):
        shape = ",".join(map(str, array.shape))
        layers.append(
            f'<layer id="{lid}" name="{name}" type="Parameter" version="opset1">'
            f'<data shape="{shape}" element_type="{et}"/>'
            f"<output>{_port(0, array.shape, et, name)}</output></layer>"
        )

    def constant(lid, name, array, const_et):
        raw = np.ascontiguousarray(array).tobytes()
        offset = len(blob)
        blob.extend(raw)
        shape = ",".join(map(str, array.shape))
        layers.append(
            f'<layer id="{lid}" name="{name}" type="Const" version="opset1">'
            f'<data element_type="{const_et}" shape="{shape}" offset="{offset}" size="{len(raw)}"/>'
            f"<output>{_port(0, array.shape, const_et)}</output></layer>"
        )

    L = np.asarray(sequence_lengths).astype(np.int32)
    parameter(0, "X", X)
    parameter(1, "initial_hidden_state", H)
    constant(2, "sequence_lengths", L, "i32")
    constant(3, "W", np.asarray(W), et)
    constant(4, "R", np.asarray(R), et)
    constant(5, "B", np.asarray(B), et)
    parameter(6, "A", A)
    in_shapes = [X.shape, H.shape, L.shape, np.shape(W), np.shape(R), np.shape(B), A.shape]
    in_types = [et, et, "i32", et, et, et, et]
    y_shape, ho_shape = (N, 1, S, hidden_size), (N, 1, hidden_size)
    inputs = "".join(_port(i, s, t) for i, (s, t) in enumerate(zip(in_shapes, in_types, strict=True)))
    layers.append(
        '<layer id="7" name="augru" type="AUGRUSequence" version="ie_internal_opset">'
        f'<data direction="forward" linear_before_reset="false" hidden_size="{hidden_size}" '
        'activations="sigmoid, tanh" activations_alpha="" activations_beta="" clip="0"/>'
        f"<input>{inputs}</input>"
        f"<output>{_port(7, y_shape, et, 'Y')}{_port(8, ho_shape, et, 'Ho')}</output></layer>"
    )
    layers.append(
        f'<layer id="8" name="Y_result" type="Result" version="opset1"><input>{_port(0, y_shape, et)}</input></layer>'
    )
    layers.append(
        f'<layer id="9" name="Ho_result" type="Result" version="opset1"><input>{_port(0, ho_shape, et)}</input></layer>'
    )
    edges = [(i, 0, 7, i) for i in range(7)] + [(7, 7, 8, 0), (7, 8, 9, 0)]
    edge_xml = "".join(f'<edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}"/>' for a, b, c, d in edges)
    xml = (
        f'<?xml version="1.0"?>\n<net name="augru_sequence" version="11"><layers>{"".join(layers)}</layers>'
        f"<edges>{edge_xml}</edges></net>\n"
    )
    return xml, bytes(blob)


def augru_sequence(X, initial_hidden_state, sequence_lengths, W, R, B, A):
    """(Y, Ho) of OpenVINO's internal AUGRUSequence, OpenVINO layout only.

    Shapes: X (N,S,I), initial_hidden_state (N,1,Hs), W (1,3Hs,I), R (1,3Hs,Hs), B (1,3Hs), A (N,S,1).
    The CPU plugin implements full sequence lengths only (sequence_lengths must all equal S; it
    raises "Cannot fallback on ngraph reference implementation" otherwise).
    """
    ov = _ov()
    X = np.asarray(X)
    xml, blob = augru_ir(X, initial_hidden_state, sequence_lengths, W, R, B, A)
    weights = ov.Tensor(np.frombuffer(blob, dtype=np.uint8).copy()) if blob else ov.Tensor(np.zeros(0, np.uint8))
    model = augru_core().read_model(model=xml, weights=weights)
    return _run(model, [X, initial_hidden_state, A], X.dtype, ov_core=augru_core())
