"""fastgru.from_openvino: IRs written by openvino.save_model (and by ov.convert_model from torch and
ONNX models) against OpenVINO's CPU plugin with an f32 precision hint; IRs written by hand (no
openvino needed) for the parser's paths and errors.

The largest |fastgru - OpenVINO| is printed after the module.
"""

import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import make_lengths
from import_helpers import Deviations, uniform

import fastgru
from fastgru import FastGRUError

DEVIATIONS = Deviations("fastgru vs OpenVINO CPU (f32 hint)")
deviation_summary = DEVIATIONS.fixture()

N, S, I, H = 4, 6, 3, 5
CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}


@pytest.fixture(scope="module")
def ov():
    return pytest.importorskip("openvino")


def weights(rng, *, d=1, gates=3, dtype=np.float32, input_size=I, hidden_size=H):
    scale = 1 / math.sqrt(hidden_size) + 0.5
    return (
        uniform(rng, (d, 3 * hidden_size, input_size), scale, dtype),
        uniform(rng, (d, 3 * hidden_size, hidden_size), scale, dtype),
        uniform(rng, (d, gates * hidden_size), 0.5, dtype),
    )


def run_openvino(ov, path, inputs):
    """OpenVINO's outputs of the IR at ``path`` (read back from disk), CPU plugin, f32 hint."""
    core = ov.Core()
    compiled = core.compile_model(core.read_model(os.fspath(path)), "CPU", CONFIG)
    request = compiled.create_infer_request()
    request.infer([np.ascontiguousarray(a) for a in inputs])
    return [np.array(request.get_output_tensor(i).data, copy=True) for i in range(len(compiled.outputs))]


# --------------------------------------------------------------------- round trips through save_model


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("linear_before_reset", [False, True])
@pytest.mark.parametrize("compress_to_fp16", [True, False])
def test_gru_sequence_round_trip(ov, direction, linear_before_reset, compress_to_fp16, tmp_path):
    from openvino import opset15 as ops

    rng = np.random.default_rng([len(direction), linear_before_reset, compress_to_fp16])
    d = 2 if direction == "bidirectional" else 1
    W, R, B = weights(rng, d=d, gates=4 if linear_before_reset else 3)
    X = ops.parameter([N, S, I], ov.Type.f32, name="X")
    H0 = ops.parameter([N, d, H], ov.Type.f32, name="H0")
    L = ops.parameter([N], ov.Type.i32, name="L")
    node = ops.gru_sequence(
        X,
        H0,
        L,
        ops.constant(W),
        ops.constant(R),
        ops.constant(B),
        H,
        direction,
        linear_before_reset=linear_before_reset,
        clip=1.5 if compress_to_fp16 else 0.0,
    )
    node.set_friendly_name("gru")
    path = tmp_path / "model.xml"
    ov.save_model(ov.Model(node.outputs(), [X, H0, L]), path, compress_to_fp16=compress_to_fp16)

    op = fastgru.from_openvino(path, "gru")
    assert isinstance(op, fastgru.GRUSequence) and op.dtype == np.float32
    assert (op.spec.direction, op.spec.linear_before_reset) == (direction, linear_before_reset)
    assert fastgru.from_openvino(path).keys() == {"gru"}
    inputs = [
        rng.standard_normal((N, S, I)).astype(np.float32),
        rng.standard_normal((N, d, H)).astype(np.float32),
        make_lengths(rng, N, S).astype(np.int32),
    ]
    DEVIATIONS.check("openvino save_model", op(*inputs), run_openvino(ov, path, inputs))


@pytest.mark.parametrize("activations, clip", [(("tanh", "relu"), 0.0), (("relu", "sigmoid"), 0.5)])
def test_activations_and_clip_round_trip(ov, activations, clip, tmp_path):
    from openvino import opset15 as ops

    rng = np.random.default_rng(len(activations[0]))
    W, R, B = (w * 0.5 for w in weights(rng))  # relu grows without bound when the weights are large
    X = ops.parameter([N, S, I], ov.Type.f32)
    H0 = ops.parameter([N, 1, H], ov.Type.f32)
    L = ops.parameter([N], ov.Type.i64)
    node = ops.gru_sequence(
        X,
        H0,
        L,
        ops.constant(W),
        ops.constant(R),
        ops.constant(B),
        H,
        "forward",
        activations=list(activations),
        clip=clip,
    )
    path = tmp_path / "model.xml"
    ov.save_model(ov.Model(node.outputs(), [X, H0, L]), path)
    (op,) = fastgru.from_openvino(path).values()
    inputs = [
        rng.standard_normal((N, S, I)).astype(np.float32),
        rng.standard_normal((N, 1, H)).astype(np.float32),
        np.full(N, S, np.int64),
    ]
    DEVIATIONS.check("openvino save_model", op(*inputs), run_openvino(ov, path, inputs))


@pytest.mark.parametrize("linear_before_reset", [False, True])
def test_gru_cell_round_trip(ov, linear_before_reset, tmp_path):
    from openvino import opset15 as ops

    rng = np.random.default_rng(10 + linear_before_reset)
    W, R, B = (w[0] for w in weights(rng, gates=4 if linear_before_reset else 3))
    X = ops.parameter([N, I], ov.Type.f32)
    H0 = ops.parameter([N, H], ov.Type.f32)
    node = ops.gru_cell(
        X, H0, ops.constant(W), ops.constant(R), ops.constant(B), H, linear_before_reset=linear_before_reset
    )
    node.set_friendly_name("cell")
    path = tmp_path / "cell.xml"
    ov.save_model(ov.Model(node.outputs(), [X, H0]), path)
    cell = fastgru.from_openvino(path, layer_name="cell")
    assert isinstance(cell, fastgru.GRUCell)
    inputs = [rng.standard_normal((N, I)).astype(np.float32), rng.standard_normal((N, H)).astype(np.float32)]
    DEVIATIONS.check("openvino save_model", (cell(*inputs),), run_openvino(ov, path, inputs))


def test_augru_sequence_ir(ov, tmp_path):
    """ie_internal_opset.AUGRUSequence, in the IR that tests/openvino_oracle.py writes and runs."""
    try:
        import openvino_oracle as oracle
    except ImportError:  # tests/ as a package
        from tests import openvino_oracle as oracle

    rng = np.random.default_rng(12)
    W, R, B = weights(rng)
    X = rng.standard_normal((N, S, I)).astype(np.float32)
    h0 = rng.standard_normal((N, 1, H)).astype(np.float32)
    A = rng.uniform(size=(N, S, 1)).astype(np.float32)
    lengths = np.full(N, S, np.int32)
    xml, blob = oracle.augru_ir(X, h0, lengths, W, R, B, A)
    (tmp_path / "augru.xml").write_text(xml)
    (tmp_path / "augru.bin").write_bytes(blob)
    op = fastgru.from_openvino(tmp_path / "augru.xml", "augru")
    assert isinstance(op, fastgru.AUGRUSequence)
    DEVIATIONS.check("openvino AUGRU", op(X, h0, lengths, A), oracle.augru_sequence(X, h0, lengths, W, R, B, A))


def test_a_torch_gru_converted_by_openvino(ov, tmp_path):
    """torch.nn.GRU -> ov.convert_model -> save_model: two GRUSequence layers, run one after the other."""
    torch = pytest.importorskip("torch")
    module = torch.nn.GRU(I, H, num_layers=2, bidirectional=True, batch_first=True).eval()
    x = np.random.default_rng(13).standard_normal((N, S, I)).astype(np.float32)
    path = tmp_path / "torch_gru.xml"
    with warnings.catch_warnings():  # torch.jit.trace's deprecation and tracer warnings, inside convert_model
        warnings.simplefilter("ignore")
        ov.save_model(ov.convert_model(module, example_input=torch.from_numpy(x)), path)
    layers = list(fastgru.from_openvino(path).values())
    assert len(layers) == 2 and all(op.spec.linear_before_reset for op in layers)
    h = np.zeros((N, 2, H), np.float32)
    y0, ho0 = layers[0](x, h, np.full(N, S))
    y1, ho1 = layers[1](y0.transpose(0, 2, 1, 3).reshape(N, S, 2 * H), h, np.full(N, S))
    output, h_n = y1.transpose(0, 2, 1, 3).reshape(N, S, 2 * H), np.concatenate([ho0, ho1], 1).transpose(1, 0, 2)
    want = run_openvino(ov, path, [x])
    want = sorted(want, key=lambda a: a.shape != (N, S, 2 * H))  # output (N, S, 2H) and h_n (4, N, H), any order
    DEVIATIONS.check("openvino convert_model", (output, h_n), want)


@pytest.mark.parametrize("bidirectional, batch_first, layers", [(True, True, 3), (False, False, 2)])
def test_a_torch_gru_converted_by_openvino_is_a_stack(ov, tmp_path, bidirectional, batch_first, layers):
    """from_openvino(stack=True) of convert_model's IR of a multi-layer torch.nn.GRU: one GRUStack,
    the joins OpenVINO writes between its GRUSequence layers (Transpose, Reshape, Squeeze) checked."""
    torch = pytest.importorskip("torch")
    module = torch.nn.GRU(I, H, num_layers=layers, bidirectional=bidirectional, batch_first=batch_first).eval()
    x = np.random.default_rng(15).standard_normal((N, S, I) if batch_first else (S, N, I)).astype(np.float32)
    path = tmp_path / "torch_gru.xml"
    with warnings.catch_warnings():  # torch.jit.trace's deprecation and tracer warnings, inside convert_model
        warnings.simplefilter("ignore")
        ov.save_model(ov.convert_model(module, example_input=torch.from_numpy(x)), path)
    stack = fastgru.from_openvino(path, stack=True)
    d = 2 if bidirectional else 1
    assert isinstance(stack, fastgru.GRUStack) and stack.num_layers == layers and stack.state_size == layers * d * H
    X = x if batch_first else x.transpose(1, 0, 2)
    Y, Ho = stack(X, np.zeros((N, stack.state_size), np.float32), np.full(N, S))
    output = Y.transpose(0, 2, 1, 3).reshape(N, S, d * H)
    h_n = Ho.reshape(N, layers * d, H).transpose(1, 0, 2)
    want = run_openvino(ov, path, [x])
    want = sorted(want, key=lambda a: a.shape != (output if batch_first else output.transpose(1, 0, 2)).shape)
    DEVIATIONS.check("openvino convert_model stack", (output if batch_first else output.transpose(1, 0, 2), h_n), want)


def test_layers_that_do_not_feed_each_other_are_not_a_stack(ov, tmp_path):
    from openvino import opset15 as ops

    rng = np.random.default_rng(16)
    X, H0, L = (
        ops.parameter(s, t) for s, t in [([N, S, I], ov.Type.f32), ([N, 1, H], ov.Type.f32), ([N], ov.Type.i32)]
    )
    first = ops.gru_sequence(X, H0, L, *map(ops.constant, weights(rng)), H, "forward")
    wrong = ops.reshape(
        first.output(0), ops.constant(np.array([N, S, H], np.int64)), False
    )  # (N, 1, S, H) -> (N, S, H)
    wrong = ops.transpose(wrong, ops.constant(np.array([0, 2, 1], np.int64)))  # (N, H, S): not a stack's X
    wrong = ops.reshape(wrong, ops.constant(np.array([N, S, H], np.int64)), False)
    second = ops.gru_sequence(wrong, H0, L, *map(ops.constant, weights(rng, input_size=H)), H, "forward")
    path = tmp_path / "wrong.xml"
    ov.save_model(ov.Model(second.outputs(), [X, H0, L]), path, compress_to_fp16=False)
    with pytest.raises(FastGRUError, match="do not form one stack"):
        fastgru.from_openvino(path, stack=True)
    assert len(fastgru.from_openvino(path)) == 2  # each layer alone, as before
    # the same sizes, joined right: a stack (the join names N, S and H, which the IR fixes)
    right = ops.reshape(first.output(0), ops.constant(np.array([N, S, H], np.int64)), False)
    second = ops.gru_sequence(right, H0, L, *map(ops.constant, weights(rng, input_size=H)), H, "forward")
    ov.save_model(ov.Model(second.outputs(), [X, H0, L]), path, compress_to_fp16=False)
    stack = fastgru.from_openvino(path, stack=True)
    x, lengths = rng.standard_normal((N, S, I)).astype(np.float32), np.array([6, 2, 0, 5], np.int32)
    Y, _ = stack(x, np.zeros((N, 2 * H), np.float32), lengths)
    want = run_openvino(ov, path, [x, np.zeros((N, 1, H), np.float32), lengths])
    DEVIATIONS.check("openvino stack, static join", (Y,), want[:1])


def test_an_onnx_gru_converted_by_openvino(ov, tmp_path):
    """ONNX GRU -> ov.convert_model -> save_model: the GRUSequence's weights are Consts made by OpenVINO."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(14)
    W, R, B = weights(rng, d=2, gates=6)
    node = helper.make_node(
        "GRU", ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=H, direction="bidirectional", linear_before_reset=1
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [S, N, I])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h")],
        [numpy_helper.from_array(a, n) for n, a in (("W", W), ("R", R), ("B", B))],
    )
    onnx_path = tmp_path / "gru.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), onnx_path)
    path = tmp_path / "gru.xml"
    ov.save_model(ov.convert_model(onnx_path), path)
    (op,) = fastgru.from_openvino(path).values()
    x = rng.standard_normal((S, N, I)).astype(np.float32)
    Y, Ho = op(x.transpose(1, 0, 2), np.zeros((N, 2, H), np.float32), np.full(N, S))
    want = run_openvino(ov, path, [x])
    DEVIATIONS.check("openvino convert_model", (Y.transpose(2, 1, 0, 3), Ho.transpose(1, 0, 2)), want)
    # and the same as from_onnx, up to the f16 rounding of the weights that save_model made
    np.testing.assert_allclose(Y.transpose(2, 1, 0, 3), fastgru.from_onnx(onnx_path)(x)[0], atol=5e-3)


# ----------------------------------------------------------------------------- IRs written by hand


_ET = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
try:
    import ml_dtypes

    _ET["bf16"] = ml_dtypes.bfloat16
except ImportError:  # bfloat16 is optional (docs/semantics.md, "Types"): its cases skip
    pass


class IR:
    """A small IR v11 writer: layers with output port 0 ... and edges, weights in one .bin."""

    def __init__(self):
        self.layers, self.edges, self.blob = [], [], bytearray()

    def layer(self, kind, name, data=None, inputs=(), outputs=1):
        """Add a layer fed by ``inputs`` (layer ids, each from its port ``len(its inputs)``); return its id."""
        lid = len(self.layers)
        attrs = "".join(f' {k}="{v}"' for k, v in (data or {}).items())
        ports_in = "".join(f'<port id="{i}"/>' for i in range(len(inputs)))
        ports_out = "".join(f'<port id="{len(inputs) + i}"/>' for i in range(outputs))
        self.layers.append(
            f'<layer id="{lid}" name="{name}" type="{kind}" version="opset1"><data{attrs}/>'
            f"<input>{ports_in}</input><output>{ports_out}</output></layer>"
        )
        for port, source in enumerate(inputs):
            if source is not None:
                self.edges.append((source[0], source[1], lid, port))
        return lid

    def const(self, name, array, element_type="f32"):
        raw = np.ascontiguousarray(array, dtype=_ET.get(element_type, array.dtype)).tobytes()
        data = {
            "element_type": element_type,
            "shape": ", ".join(map(str, np.shape(array))),
            "offset": len(self.blob),
            "size": len(raw),
        }
        self.blob.extend(raw)
        return (self.layer("Const", name, data), 0)

    def write(self, path):
        edges = "".join(
            f'<edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}"/>' for a, b, c, d in self.edges
        )
        path.write_text(
            f'<?xml version="1.0"?>\n<net name="hand" version="11"><layers>{"".join(self.layers)}'
            f"</layers><edges>{edges}</edges></net>\n"
        )
        path.with_suffix(".bin").write_bytes(bytes(self.blob))
        return path


def hand_ir(tmp_path, W, R, B, *, kind="GRUSequence", element_type="f32", convert=None, data=None, name="gru"):
    """An IR with one GRU layer whose W, R, B are Consts of ``element_type``, through a Convert to
    ``convert`` when given."""
    ir = IR()
    x = (ir.layer("Parameter", "X"), 0)
    h = (ir.layer("Parameter", "H"), 0)
    sources = [x, h] if kind == "GRUCell" else [x, h, (ir.layer("Parameter", "L"), 0)]
    for wname, w in (("W", W), ("R", R), ("B", B)):
        if w is None:
            continue
        src = ir.const(wname, w, element_type)
        if convert:
            src = (ir.layer("Convert", f"{wname}_convert", {"destination_type": convert}, [src]), 1)
        sources.append(src)
    attrs = {
        "hidden_size": R.shape[-1],
        "activations": "sigmoid, tanh",
        "activations_alpha": "",
        "activations_beta": "",
        "clip": "0",
        "linear_before_reset": "false",
    }
    if kind != "GRUCell":
        attrs["direction"] = "forward"
    attrs.update(data or {})
    ir.layer(kind, name, {k: v for k, v in attrs.items() if v is not None}, sources, outputs=2)
    return ir.write(tmp_path / "hand.xml")


def test_hand_written_ir_equals_the_op(tmp_path):
    rng = np.random.default_rng(20)
    W, R, B = weights(rng, d=2, gates=4)
    data = {
        "direction": "bidirectional",
        "linear_before_reset": "true",
        "clip": "1.25",
        "activations": "tanh,relu",
        "activations_alpha": "0.5, 1",
    }
    op = fastgru.from_openvino(hand_ir(tmp_path, W, R, B, data=data), "gru")
    want_op = fastgru.GRUSequence(
        W, R, B, direction="bidirectional", linear_before_reset=True, clip=1.25, activations=("tanh", "relu")
    )
    X, h0 = rng.standard_normal((N, S, I)).astype(np.float32), rng.standard_normal((N, 2, H)).astype(np.float32)
    lengths = make_lengths(rng, N, S)
    for got, want in zip(op(X, h0, lengths), want_op(X, h0, lengths), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "element_type, convert, dtype",
    [
        ("f16", "f32", np.float32),
        ("f16", None, np.float16),
        ("f64", None, np.float64),
        ("f32", "f64", np.float64),
        ("bf16", None, "bfloat16"),
        ("f16", "bf16", "bfloat16"),
    ],
)
def test_element_types_and_converts(element_type, convert, dtype, tmp_path):
    if dtype == "bfloat16":  # every case converting to bf16 has this dtype
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    rng = np.random.default_rng(21)
    W, R, B = weights(rng, dtype=np.float64)
    op = fastgru.from_openvino(hand_ir(tmp_path, W, R, B, element_type=element_type, convert=convert), "gru")
    assert op.dtype == np.dtype(dtype)
    stored = [w.astype(_ET[element_type]) for w in (W, R, B)]
    want_op = fastgru.GRUSequence(*(w.astype(dtype) for w in stored))
    X = rng.standard_normal((N, S, I)).astype(dtype)
    h0 = np.zeros((N, 1, H), dtype)
    for got, want in zip(op(X, h0, np.full(N, S)), want_op(X, h0, np.full(N, S)), strict=True):
        np.testing.assert_array_equal(got, want)


def test_gru_cell_with_and_without_b(tmp_path):
    rng = np.random.default_rng(22)
    W, R, B = (w[0] for w in weights(rng))
    X, h = rng.standard_normal((N, I)).astype(np.float32), rng.standard_normal((N, H)).astype(np.float32)
    cell = fastgru.from_openvino(hand_ir(tmp_path, W, R, B, kind="GRUCell"), "gru")
    np.testing.assert_array_equal(cell(X, h), fastgru.gru_cell(X, h, W, R, B))
    cell = fastgru.from_openvino(hand_ir(tmp_path, W, R, None, kind="GRUCell"), "gru")
    np.testing.assert_array_equal(cell(X, h), fastgru.gru_cell(X, h, W, R))


def test_openvino_is_not_imported(tmp_path):
    """import fastgru imports none of torch, onnx, openvino; from_openvino works without openvino."""
    rng = np.random.default_rng(23)
    path = hand_ir(tmp_path, *weights(rng))
    code = (
        "import sys, fastgru\n"
        f"ops = fastgru.from_openvino({os.fspath(path)!r})\n"
        "assert list(ops) == ['gru'], ops\n"
        "loaded = {'torch', 'onnx', 'onnxruntime', 'openvino'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


# -------------------------------------------------------------------------------------------- errors


def test_no_gru_layer_and_unknown_name(tmp_path):
    ir = IR()
    ir.layer("Parameter", "X")
    path = ir.write(tmp_path / "empty.xml")
    with pytest.raises(
        FastGRUError,
        match=r"from_openvino: .*empty.xml has no GRUSequence, GRUCell or AUGRUSequence "
        r"layer \(in its main graph\)",
    ):
        fastgru.from_openvino(path)
    path = hand_ir(tmp_path, *weights(np.random.default_rng(24)))
    with pytest.raises(FastGRUError, match=r"hand.xml has no GRU layer named 'lstm'; its GRU layers: 'gru'"):
        fastgru.from_openvino(path, "lstm")
    (tmp_path / "bad.xml").write_text("<model/>")
    with pytest.raises(FastGRUError, match=r"bad.xml is not an OpenVINO IR \(no <net><layers>\)"):
        fastgru.from_openvino(tmp_path / "bad.xml")


def test_non_constant_weights(tmp_path):
    W, R, B = weights(np.random.default_rng(25))
    ir = IR()
    x, h, lens = ((ir.layer("Parameter", n), 0) for n in ("X", "H", "L"))
    w_param = (ir.layer("Parameter", "W_in"), 0)
    r_scaled = (ir.layer("Multiply", "R_times", inputs=[ir.const("R", R), ir.const("two", np.float32(2))]), 2)
    gru = ir.layer(
        "GRUSequence",
        "gru",
        {"hidden_size": H, "direction": "forward"},
        [x, h, lens, w_param, r_scaled, ir.const("B", B)],
        outputs=2,
    )
    path = ir.write(tmp_path / "params.xml")
    with pytest.raises(
        FastGRUError,
        match=r"^from_openvino: GRUSequence layer 'gru': W comes from layer 'W_in' "
        r"\(Parameter\); fastgru needs constant weights: a Const layer, optionally "
        r"through Convert layers",
    ):
        fastgru.from_openvino(path)
    ir.edges = [e for e in ir.edges if e[0] != w_param[0]] + [(ir.const("W", W)[0], 0, gru, 3)]
    with pytest.raises(FastGRUError, match=r"GRUSequence layer 'gru': R comes from layer 'R_times' \(Multiply\)"):
        fastgru.from_openvino(ir.write(tmp_path / "params.xml"))
    ir.edges = [e for e in ir.edges if e[2:] != (gru, 4)]
    with pytest.raises(FastGRUError, match=r"GRUSequence layer 'gru': R comes from nothing"):
        fastgru.from_openvino(ir.write(tmp_path / "params.xml"))


@pytest.mark.parametrize(
    "data, error, message",
    [
        ({"direction": "sideways"}, FastGRUError, r"GRUSequence: direction is 'sideways'"),
        ({"activations": "hardsigmoid, tanh"}, FastGRUError, r"GRUSequence: activations\[0\] is 'hardsigmoid'"),
        ({"linear_before_reset": "maybe"}, FastGRUError, r"attribute linear_before_reset='maybe' is not a valid value"),
        ({"clip": "-1"}, FastGRUError, r"GRUSequence: clip is -1.0; expected a number >= 0"),
        ({"hidden_size": "7"}, FastGRUError, r"GRUSequence: .*hidden_size"),
        (
            {"input_forget": "true"},
            NotImplementedError,
            r"attribute input_forget='true' is not supported; fastgru knows ",
        ),
    ],
)
def test_attribute_errors(data, error, message, tmp_path):
    path = hand_ir(tmp_path, *weights(np.random.default_rng(26)), data=data)
    with pytest.raises(error, match=f"^from_openvino: GRUSequence layer 'gru': {message}"):
        fastgru.from_openvino(path)


def test_augru_attributes_are_fixed(tmp_path):
    W, R, B = weights(np.random.default_rng(27))
    path = hand_ir(tmp_path, W, R, B, kind="AUGRUSequence", data={"clip": "2"})
    with pytest.raises(
        NotImplementedError,
        match=r"AUGRUSequence layer 'gru': clip=2.0; AUGRUSequence's clip is "
        r"always 0.0",
    ):
        fastgru.from_openvino(path)


def test_const_errors(tmp_path):
    W, R, B = weights(np.random.default_rng(28))
    path = hand_ir(tmp_path, W, R, B, element_type="i8")
    with pytest.raises(
        NotImplementedError,
        match=r"W \(Const 'W'\): element_type 'i8' is not supported; expected one "
        r"of f16, f32, f64",
    ):
        fastgru.from_openvino(path)
    path = hand_ir(tmp_path, W, R, B)
    xml = path.read_text()
    path.write_text(xml.replace('size="180"', 'size="100"', 1))
    with pytest.raises(FastGRUError, match=r"W \(Const 'W'\): size=100 bytes, but shape \(1, 15, 3\) of f32 needs 180"):
        fastgru.from_openvino(path)
    path.write_text(xml.replace('offset="0"', 'offset="1000"', 1))
    with pytest.raises(FastGRUError, match=r"W \(Const 'W'\): bytes 1000 to 1180 are past the end of .*hand.bin"):
        fastgru.from_openvino(path)
    path.write_text(xml.replace('shape="1, 15, 3"', 'shape="1, x, 3"', 1))
    with pytest.raises(
        FastGRUError,
        match=r"W \(Const 'W'\): <data> has shape='1, x, 3', offset='0', size='180'; "
        r"expected integers",
    ):
        fastgru.from_openvino(path)
    path.write_text(xml)
    moved = path.rename(tmp_path / "weights.xml").with_suffix(".bin")
    path.with_suffix(".bin").rename(moved)
    assert fastgru.from_openvino(tmp_path / "weights.xml", bin_path=moved).keys() == {"gru"}
    with pytest.raises(
        FastGRUError,
        match=r"^from_openvino: GRUSequence layer 'gru': GRUSequence: B has shape "
        r"\(1, 10\); expected \(num_directions=1, 3\*hidden_size=15\)",
    ):
        fastgru.from_openvino(hand_ir(tmp_path, W, R, B[:, :10]))


@pytest.mark.parametrize("weight_dtype", ["bfloat16", "int8"])
def test_compact_weights(ov, weight_dtype, tmp_path):
    """``weight_dtype=`` reaches every op from_openvino makes: OpenVINO's results within the compact
    weights' error, not the exact import's bits."""
    from openvino import opset15 as ops

    rng = np.random.default_rng(8)
    W, R, B = weights(rng, gates=4)
    X = ops.parameter([N, S, I], ov.Type.f32, name="X")
    H0 = ops.parameter([N, 1, H], ov.Type.f32, name="H0")
    L = ops.parameter([N], ov.Type.i32, name="L")
    node = ops.gru_sequence(
        X, H0, L, ops.constant(W), ops.constant(R), ops.constant(B), H, "forward", linear_before_reset=True
    )
    node.set_friendly_name("gru")
    path = tmp_path / "model.xml"
    ov.save_model(ov.Model(node.outputs(), [X, H0, L]), path, compress_to_fp16=False)
    op = fastgru.from_openvino(path, "gru", weight_dtype=weight_dtype)
    assert op.weight_dtype == weight_dtype
    assert fastgru.from_openvino(path, weight_dtype=weight_dtype)["gru"].weight_dtype == weight_dtype
    inputs = [
        rng.standard_normal((N, S, I)).astype(np.float32),
        rng.standard_normal((N, 1, H)).astype(np.float32),
        np.full(N, S, np.int32),
    ]
    exact = fastgru.from_openvino(path, "gru")(*inputs)
    for g, w, e in zip(op(*inputs), run_openvino(ov, path, inputs), exact, strict=True):
        np.testing.assert_allclose(g, w, atol=3e-2)
        assert not np.array_equal(g, e)
