"""fastgru.from_onnx against ONNX Runtime and the ONNX backend's own GRU node tests.

ONNX Runtime's CPU GRU runs layout 0 only ("Batchwise recurrent operations (layout == 1) are not
supported"): a layout-1 model is compared with ONNX Runtime running the same node in layout 0 on
transposed data, and with the backend test test_gru_batchwise. The largest |fastgru - runtime| is
printed after the module.
"""

import importlib
import math
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from conftest import make_lengths  # noqa: E402
from import_helpers import Deviations, uniform  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import fastgru  # noqa: E402
from fastgru import FastGRUError  # noqa: E402

DEVIATIONS = Deviations("fastgru vs ONNX Runtime / the ONNX backend test data")
deviation_summary = DEVIATIONS.fixture()

N, S, I, H = 4, 6, 3, 5
_ELEM = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.float16): TensorProto.FLOAT16,
}
try:
    import ml_dtypes

    _ELEM[np.dtype(ml_dtypes.bfloat16)] = TensorProto.BFLOAT16
except ImportError:  # bfloat16 is optional: its test skips
    pass


def gru_model(
    W,
    R,
    B=None,
    *,
    layout=None,
    with_lens=False,
    with_h0=False,
    outputs=("Y", "Y_h"),
    weights="initializer",
    opset=22,
    **attrs,
):
    """A model with one GRU node: graph inputs X (and sequence_lens, initial_h when asked), W, R, B
    as initializers (``weights="initializer"``), Constant nodes ("constant") or graph inputs ("input");
    ``layout`` and the other keywords are the node's attributes."""
    dtype = np.dtype(W.dtype)
    elem = _ELEM[dtype]
    names = [
        "X",
        "W",
        "R",
        "B" if B is not None else "",
        "sequence_lens" if with_lens else "",
        "initial_h" if with_h0 else "",
    ]
    while names[-1] == "":
        names.pop()
    if layout is not None:  # an attribute since opset 14
        attrs["layout"] = layout
    attrs.setdefault("hidden_size", R.shape[-1])  # ONNX Runtime requires it
    node = helper.make_node("GRU", names, list(outputs), name="gru", **attrs)
    graph_inputs = [helper.make_tensor_value_info("X", elem, None)]
    if with_lens:
        graph_inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, None))
    if with_h0:
        graph_inputs.append(helper.make_tensor_value_info("initial_h", elem, None))
    tensors = [numpy_helper.from_array(a, name) for name, a in (("W", W), ("R", R), ("B", B)) if a is not None]
    nodes, initializers = [node], []
    if weights == "initializer":
        initializers = tensors
    elif weights == "constant":
        nodes = [helper.make_node("Constant", [], [t.name], value=t) for t in tensors] + nodes
    else:
        graph_inputs += [helper.make_tensor_value_info(t.name, elem, list(t.dims)) for t in tensors]
    graph_outputs = [helper.make_tensor_value_info(name, elem, None) for name in outputs if name]
    graph = helper.make_graph(nodes, "gru_graph", graph_inputs, graph_outputs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def random_weights(rng, *, direction="forward", dtype=np.float32, hidden_size=H, input_size=I):
    d = 2 if direction == "bidirectional" else 1
    scale = 1 / math.sqrt(hidden_size) + 0.5
    return (
        uniform(rng, (d, 3 * hidden_size, input_size), scale, dtype),
        uniform(rng, (d, 3 * hidden_size, hidden_size), scale, dtype),
        uniform(rng, (d, 6 * hidden_size), 0.5, dtype),
    )


# ----------------------------------------------------------------------------------- ONNX Runtime


def run_ort(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def ort_oracle(W, R, B, feeds, *, layout, **kwargs):
    """ONNX Runtime's (Y, Y_h); layout 1 runs as layout 0 on transposed data, transposed back."""
    if layout == 0:
        return run_ort(gru_model(W, R, B, layout=0, **kwargs), feeds)
    feeds = dict(feeds, X=feeds["X"].transpose(1, 0, 2))
    if "initial_h" in feeds:
        feeds["initial_h"] = np.ascontiguousarray(feeds["initial_h"].transpose(1, 0, 2))
    Y, Y_h = run_ort(gru_model(W, R, B, layout=0, **kwargs), feeds)
    return Y.transpose(2, 0, 1, 3), Y_h.transpose(1, 0, 2)


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("extras", ["plain", "clip+lens", "h0", "clip+lens+h0"])
def test_random_models_match_onnxruntime(layout, direction, linear_before_reset, extras, tmp_path):
    rng = np.random.default_rng([layout, len(direction), linear_before_reset, len(extras)])
    W, R, B = random_weights(rng, direction=direction)
    d = W.shape[0]
    kwargs = {
        "with_lens": "lens" in extras,
        "with_h0": "h0" in extras,
        "direction": direction,
        "linear_before_reset": linear_before_reset,
        "hidden_size": H,
    }
    if "clip" in extras:
        kwargs["clip"] = 0.7
    X = rng.standard_normal((S, N, I) if layout == 0 else (N, S, I)).astype(np.float32)
    feeds = {"X": X}
    if kwargs["with_lens"]:
        feeds["sequence_lens"] = make_lengths(rng, N, S).astype(np.int32)
    if kwargs["with_h0"]:
        feeds["initial_h"] = rng.standard_normal((d, N, H) if layout == 0 else (N, d, H)).astype(np.float32)
    path = tmp_path / "gru.onnx"
    onnx.save(gru_model(W, R, B, layout=layout, **kwargs), path)

    gru = fastgru.from_onnx(path)
    got = gru(**feeds)
    want = ort_oracle(W, R, B, feeds, layout=layout, **kwargs)
    DEVIATIONS.check(f"onnxruntime layout {layout}", got, want)


@pytest.mark.parametrize("activations", [["Tanh", "Relu"], ["Relu", "Sigmoid", "Relu", "Sigmoid"], ["sigmoid", "tanh"]])
def test_activations_match_onnxruntime(activations):
    rng = np.random.default_rng(len(activations))
    direction = "bidirectional" if len(activations) == 4 else "forward"
    W, R, B = random_weights(rng, direction=direction)
    W, R = W * 0.5, R * 0.5  # relu as f or g grows without bound when the weights are large
    model = gru_model(W, R, B, direction=direction, activations=activations, hidden_size=H)
    feeds = {"X": rng.standard_normal((S, N, I)).astype(np.float32)}
    DEVIATIONS.check("onnxruntime layout 0", fastgru.from_onnx(model)(**feeds), run_ort(model, feeds))


def test_float64_and_opset7_without_bias_match_the_onnx_reference():
    # ONNX Runtime: "GRU operator does not support double yet"; onnx's own ReferenceEvaluator runs
    # it in float64 (it ignores sequence_lens, clip and activations, which this model leaves out).
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(64)
    W, R, _ = random_weights(rng, dtype=np.float64, direction="bidirectional")
    model = gru_model(W, R, direction="bidirectional", opset=7)
    feeds = {"X": rng.standard_normal((S, N, I))}
    gru = fastgru.from_onnx(model)
    assert gru.dtype == np.float64
    want = ReferenceEvaluator(model).run(None, feeds)
    DEVIATIONS.check("onnx.reference float64", gru(**feeds), want)


def test_weights_as_constant_nodes_and_external_data(tmp_path):
    rng = np.random.default_rng(3)
    W, R, B = random_weights(rng)
    X = rng.standard_normal((S, N, I)).astype(np.float32)
    want = fastgru.from_onnx(gru_model(W, R, B))(X)
    got = fastgru.from_onnx(gru_model(W, R, B, weights="constant"))(X)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    path = tmp_path / "external.onnx"
    onnx.save_model(
        gru_model(W, R, B), os.fspath(path), save_as_external_data=True, location="weights.bin", size_threshold=0
    )
    assert (tmp_path / "weights.bin").exists()
    for g, w in zip(fastgru.from_onnx(path)(X), want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_initializers_listed_as_graph_inputs():
    """Older exporters list the initializers among the graph inputs too (IR version < 4)."""
    rng = np.random.default_rng(11)
    W, R, B = random_weights(rng, direction="reverse")
    model = gru_model(W, R, B, direction="reverse", opset=7)
    model.graph.input.extend(
        helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.dims)) for t in model.graph.initializer
    )
    feeds = {"X": rng.standard_normal((S, N, I)).astype(np.float32)}
    got = fastgru.from_onnx(model)(**feeds)
    DEVIATIONS.check("onnxruntime layout 0", got, run_ort(model, feeds))


# ------------------------------------------------------------------------------- GRU versions, opsets

#: (opset, the GRU version in force there): the first and last opset of each version, and the newest.
OPSETS = [
    (1, 1),
    (2, 1),
    (3, 3),
    (6, 3),
    (7, 7),
    (13, 7),
    (14, 14),
    (21, 14),
    (22, 22),
    (onnx.defs.onnx_opset_version(), 22),
]


@pytest.mark.parametrize("opset, version", OPSETS, ids=[f"opset{o}" for o, _ in OPSETS])
def test_every_gru_version_matches_its_runtime(opset, version):
    """GRU-7, 14 and 22 against ONNX Runtime; GRU-1 and GRU-3, which ONNX Runtime does not run,
    against the onnx package's ReferenceEvaluator (which ignores sequence_lens, clip and activations,
    so the model has none). Each version's own attributes are accepted."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng([opset, version])
    W, R, B = random_weights(rng, direction="bidirectional")
    attrs = {"direction": "bidirectional"}
    if version >= 3:
        attrs["linear_before_reset"] = 1
    model = gru_model(W, R, B, opset=opset, **attrs)
    feeds = {"X": rng.standard_normal((S, N, I)).astype(np.float32)}
    gru = fastgru.from_onnx(model)
    assert (gru.opset, gru.version) == (opset, version)
    got = gru(**feeds)
    if version >= 7:
        DEVIATIONS.check("onnxruntime layout 0", got, run_ort(model, feeds))
    else:
        DEVIATIONS.check("onnx.reference GRU-1, 3", got, ReferenceEvaluator(model).run(None, feeds))
    own = {1: {"output_sequence": 1}, 3: {"output_sequence": 0}, 7: {}, 14: {"layout": 0}, 22: {"layout": 0}}[version]
    if own:  # output_sequence changes no value; layout 0 is the default
        with_own = fastgru.from_onnx(gru_model(W, R, B, opset=opset, **attrs, **own))(**feeds)
        for g, w in zip(with_own, got, strict=True):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(
    "opset, attrs, message",
    [
        (
            7,
            {"layout": 0},
            r"attribute 'layout' does not exist in opset 7, whose GRU is GRU-7; it is an attribute of "
            r"GRU-14 and later",
        ),
        (13, {"layout": 1}, r"attribute 'layout' does not exist in opset 13, whose GRU is GRU-7"),
        (3, {"layout": 0}, r"attribute 'layout' does not exist in opset 3, whose GRU is GRU-3"),
        (
            1,
            {"linear_before_reset": 1},
            r"attribute 'linear_before_reset' does not exist in opset 1, whose GRU is "
            r"GRU-1; it is an attribute of GRU-3 and later",
        ),
        (
            7,
            {"output_sequence": 1},
            r"attribute 'output_sequence' does not exist in opset 7, whose GRU is GRU-7; it is "
            r"an attribute of GRU-1 and GRU-3 only",
        ),
        (22, {"output_sequence": 0}, r"attribute 'output_sequence' does not exist in opset 22, whose GRU is GRU-22"),
    ],
)
def test_an_attribute_of_another_gru_version(opset, attrs, message):
    W, R, B = random_weights(np.random.default_rng(12))
    with pytest.raises(FastGRUError, match=f"^from_onnx: GRU node 'gru': {message}"):
        fastgru.from_onnx(gru_model(W, R, B, opset=opset, **attrs))


def test_the_opset_must_be_known():
    W, R, B = random_weights(np.random.default_rng(13))
    model = gru_model(W, R, B)
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(
        FastGRUError,
        match=r"^from_onnx: the model imports no opset of the default domain '' "
        r"\(ai.onnx\), which defines GRU \(its opset imports: 'com.example'\)",
    ):
        fastgru.from_onnx(model)
    model.opset_import.append(helper.make_opsetid("ai.onnx", 14))  # the default domain's other name
    assert fastgru.from_onnx(model).version == 14
    newest = onnx.defs.onnx_opset_version()
    for opset in (newest + 1, 0):
        with pytest.raises(
            FastGRUError,
            match=rf"^from_onnx: the model imports opset {opset} of the default domain; "
            rf"the installed onnx \S+ knows opsets 1 to {newest}, so which GRU "
            r"version that opset holds is unknown \(upgrade onnx\)",
        ):
            fastgru.from_onnx(gru_model(W, R, B, opset=opset))


def test_a_gru_version_fastgru_does_not_know(monkeypatch):
    """A future onnx may define a GRU-N: fastgru refuses it rather than guess."""
    W, R, B = random_weights(np.random.default_rng(14))
    real = onnx.defs.get_schema
    newest = onnx.defs.onnx_opset_version()

    class Future:
        since_version = newest

    monkeypatch.setattr(onnx.defs, "get_schema", lambda op, *args: Future if op == "GRU" else real(op, *args))
    with pytest.raises(
        FastGRUError,
        match=rf"^from_onnx: the model imports opset {newest}, whose GRU is "
        rf"GRU-{newest}; fastgru reads GRU-1, 3, 7, 14 and 22$",
    ):
        fastgru.from_onnx(gru_model(W, R, B, opset=newest))


@pytest.mark.parametrize("dtype_name, opset", [("float16", 7), ("bfloat16", 22)])
def test_half_precision_weights(dtype_name, opset):
    """float16 from GRU-1, bfloat16 from GRU-22 (before it, an error)."""
    half = np.dtype(np.float16) if dtype_name == "float16" else np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    rng = np.random.default_rng(15)
    W, R, B = (a.astype(half) for a in random_weights(rng))
    X = rng.standard_normal((S, N, I)).astype(half)
    gru = fastgru.from_onnx(gru_model(W, R, B, opset=opset))
    Y, Y_h = gru(X)
    assert Y.dtype == Y_h.dtype == half
    # Computed in float32 and rounded once, as fastgru computes float16 and bfloat16: the bits of a
    # float32 model of the same values. fastgru's B is of the weights' dtype: ONNX's Wb + Rb is rounded to it.
    fused = (B[:, : 3 * H] + B[:, 3 * H :]).astype(np.float32)
    B32 = np.concatenate([fused, np.zeros_like(fused)], axis=1)
    Y32, Y_h32 = fastgru.from_onnx(gru_model(W.astype(np.float32), R.astype(np.float32), B32, opset=opset))(
        X.astype(np.float32)
    )
    np.testing.assert_array_equal(Y.view(np.uint16), Y32.astype(half).view(np.uint16))
    np.testing.assert_array_equal(Y_h.view(np.uint16), Y_h32.astype(half).view(np.uint16))
    if dtype_name == "bfloat16":
        with pytest.raises(
            FastGRUError,
            match=r"^from_onnx: GRU node 'gru': W is bfloat16, a type of GRU-22 "
            r"\(opset 22\) and later; the model imports opset 21, whose GRU is "
            r"GRU-14$",
        ):
            fastgru.from_onnx(gru_model(W, R, B, opset=21))


def test_constant_sequence_lens_and_initial_h_are_the_call_defaults():
    rng = np.random.default_rng(4)
    W, R, B = random_weights(rng)
    lens = np.array([6, 0, 3, 1], dtype=np.int32)
    h0 = rng.standard_normal((1, N, H)).astype(np.float32)
    model = gru_model(W, R, B)
    model.graph.node[0].input.extend(["lens", "h0"])
    model.graph.initializer.extend([numpy_helper.from_array(lens, "lens"), numpy_helper.from_array(h0, "h0")])
    X = rng.standard_normal((S, N, I)).astype(np.float32)
    got = fastgru.from_onnx(model)(X)
    want = fastgru.from_onnx(gru_model(W, R, B))(X, lens, h0)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    DEVIATIONS.check("onnxruntime layout 0", got, run_ort(model, {"X": X}))


def test_the_object_exposes_the_prepared_op():
    rng = np.random.default_rng(5)
    W, R, B = random_weights(rng, direction="bidirectional")
    gru = fastgru.from_onnx(gru_model(W, R, B, direction="bidirectional", linear_before_reset=1, layout=1))
    assert isinstance(gru.op, fastgru.GRUSequence)
    assert (gru.layout, gru.direction, gru.hidden_size, gru.input_size, gru.node_name) == (
        1,
        "bidirectional",
        H,
        I,
        "gru",
    )
    assert gru.op.spec.linear_before_reset
    assert (gru.opset, gru.version) == (22, 22)
    assert repr(gru).startswith("OnnxGRU(node_name='gru', version=22, layout=1")
    X = rng.standard_normal((N, S, I)).astype(np.float32)
    Y, Y_h = gru(X)
    Y_op, Ho_op = gru.op(X, np.zeros((N, 2, H), np.float32), np.full(N, S))
    np.testing.assert_array_equal(Y, Y_op.transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(Y_h, Ho_op)


# ------------------------------------------------------------------------ the ONNX backend test data


def load_case_dir(path):
    """(name, model, inputs, outputs) of one backend test directory: model.onnx and
    test_data_set_0/{input,output}_<i>.pb."""
    data = os.path.join(path, "test_data_set_0")

    def tensors(kind):
        count = sum(f.startswith(kind + "_") for f in os.listdir(data))
        return [numpy_helper.to_array(onnx.load_tensor(os.path.join(data, f"{kind}_{i}.pb"))) for i in range(count)]

    return os.path.basename(path), onnx.load(os.path.join(path, "model.onnx")), tensors("input"), tensors("output")


def backend_cases():
    """(name, model, inputs, outputs) of the onnx package's GRU node tests: the files of
    onnx/backend/test/data/node/test_gru_* when the package ships them, else the same cases made
    by their generator, onnx/backend/test/case/node/gru.py (recent wheels ship only the generator)."""
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    names = sorted(n for n in os.listdir(root) if n.startswith("test_gru_")) if os.path.isdir(root) else []
    if names:
        return [load_case_dir(os.path.join(root, name)) for name in names]
    node_cases = importlib.import_module("onnx.backend.test.case.node")
    # Defining the generator's class runs the exports, which compute the expected outputs with
    # np.dot. OpenBLAS's kernels can leave the invalid flag raised on finite data (numpy#24067),
    # at random (it failed one CI run's collection), and numpy then warns, which this suite turns
    # into an error. The flag is ignored there; the outputs are checked finite instead.
    with np.errstate(invalid="ignore"):
        importlib.import_module("onnx.backend.test.case.node.gru")
    cases = [
        (c.name, c.model, *c.data_sets[0])
        for c in node_cases._NodeTestCases
        if c.name.startswith("test_gru_") and not c.name.endswith("_expanded")
    ]
    for name, _, _, outputs in cases:
        assert all(np.isfinite(o).all() for o in outputs), f"{name}: the generator's expected outputs are not finite"
    return cases


BACKEND_CASES = backend_cases()


def test_the_backend_cases_are_found(tmp_path):
    assert {"test_gru_defaults", "test_gru_seq_length", "test_gru_with_initial_bias", "test_gru_batchwise"} <= {
        c[0] for c in BACKEND_CASES
    }
    # the files' format, as onnx/backend/test/data/node holds them, reads back to the same case
    name, model, inputs, outputs = BACKEND_CASES[0]
    (tmp_path / name / "test_data_set_0").mkdir(parents=True)
    onnx.save(model, tmp_path / name / "model.onnx")
    for kind, arrays in (("input", inputs), ("output", outputs)):
        for i, a in enumerate(arrays):
            onnx.save_tensor(numpy_helper.from_array(a), tmp_path / name / "test_data_set_0" / f"{kind}_{i}.pb")
    loaded = load_case_dir(os.fspath(tmp_path / name))
    assert loaded[0] == name and loaded[1] == model
    for got, want in zip(loaded[2] + loaded[3], inputs + outputs, strict=True):
        np.testing.assert_array_equal(got, want)


def with_initializers(model, values):
    """The model with the GRU's W, R, B moved from graph inputs to initializers of the given values."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    node = model.graph.node[0]
    weights = dict(zip(node.input[1:4], values[1:4]))
    kept = [i for i in model.graph.input if i.name not in weights]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    model.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in weights.items() if k)
    return model


@pytest.mark.parametrize("case", BACKEND_CASES, ids=[c[0] for c in BACKEND_CASES])
def test_onnx_backend_gru_node_tests(case, tmp_path):
    name, model, inputs, outputs = case
    node = model.graph.node[0]
    with pytest.raises(FastGRUError, match=r"W is 'W', a graph input; fastgru needs constant weights"):
        fastgru.from_onnx(model)
    values = dict(zip([n for n in node.input if n], inputs))
    path = tmp_path / f"{name}.onnx"
    onnx.save(with_initializers(model, [values.get(n) for n in node.input]), path)
    gru = fastgru.from_onnx(path)
    call = {k: values[k] for k in ("sequence_lens", "initial_h") if k in values}
    results = dict(zip(("Y", "Y_h"), gru(values[node.input[0]], **call)))
    got = [results[kind] for kind, out in zip(("Y", "Y_h"), node.output) if out]
    DEVIATIONS.check("onnx backend test data", got, outputs)


# -------------------------------------------------------------------------------------------- errors


def test_a_model_without_a_gru_node():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["X"], ["Y"])],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    )
    with pytest.raises(FastGRUError, match=r"from_onnx: the graph has no GRU node \(its nodes: Relu\)"):
        fastgru.from_onnx(helper.make_model(graph))


def two_grus(rng):
    W, R, B = random_weights(rng)
    model = gru_model(W, R, B)
    second = helper.make_node("GRU", ["Y_h_in", "W", "R", "B"], ["Y2", "Y_h2"], name="second", hidden_size=H)
    model.graph.node.append(second)
    return model


def test_several_gru_nodes_need_a_name():
    model = two_grus(np.random.default_rng(6))
    with pytest.raises(
        FastGRUError,
        match=r"has 2 GRU nodes: 'gru' \(outputs Y, Y_h\); 'second' \(outputs Y2, "
        r"Y_h2\); they do not form one stack .*: pass node_name=",
    ):
        fastgru.from_onnx(model)
    assert fastgru.from_onnx(model, "second").node_name == "second"
    assert fastgru.from_onnx(model, node_name="Y_h").node_name == "gru"  # an output name selects too
    with pytest.raises(FastGRUError, match=r"no GRU node named 'third'; the GRU nodes are 'gru'"):
        fastgru.from_onnx(model, "third")


def test_weights_from_a_graph_input_or_another_node():
    rng = np.random.default_rng(7)
    W, R, B = random_weights(rng)
    with pytest.raises(
        FastGRUError,
        match=r"GRU node 'gru': W is 'W', a graph input; fastgru needs constant "
        r"weights \(initializers or Constant nodes\)",
    ):
        fastgru.from_onnx(gru_model(W, R, B, weights="input"))
    model = gru_model(W, R, B)
    model.graph.node[0].input[2] = "R_t"
    model.graph.node.insert(0, helper.make_node("Transpose", ["R_raw"], ["R_t"], name="tr"))
    with pytest.raises(
        FastGRUError,
        match=r"R is 'R_t', the output of node 'tr' \(Transpose\); fastgru needs "
        r"constant weights",
    ):
        fastgru.from_onnx(model)
    model.graph.node[-1].input[2] = "nowhere"
    with pytest.raises(FastGRUError, match=r"R is 'nowhere', not defined in the graph"):
        fastgru.from_onnx(model)


@pytest.mark.parametrize(
    "attrs, error, message",
    [
        (
            {"activations": ["HardSigmoid", "Tanh"]},
            NotImplementedError,
            r"activations\[0\] is 'HardSigmoid'; fastgru implements Sigmoid, Tanh and Relu",
        ),
        ({"activations": ["Sigmoid", "Affine"]}, NotImplementedError, r"activations\[1\] is 'Affine'"),
        (
            {"activations": ["Sigmoid", "Tanh", "Sigmoid", "Relu"], "direction": "bidirectional"},
            NotImplementedError,
            r"activations \['Sigmoid', 'Tanh', 'Sigmoid', 'Relu'\] give the two directions different functions; "
            r"fastgru runs both directions with one pair",
        ),
        (
            {"activations": ["Sigmoid", "Tanh"], "direction": "bidirectional"},
            FastGRUError,
            r"activations is \['Sigmoid', 'Tanh'\]; expected 4 names \(f and g for each direction\)",
        ),
        ({"clip": 0.0}, FastGRUError, r"clip is 0.0; ONNX clips to \[-clip, clip\] and needs clip > 0"),
        ({"clip": -1.0}, FastGRUError, r"clip is -1.0"),
        ({"layout": 2}, FastGRUError, r"layout is 2; expected 0 \(time-major\) or 1 \(batch-major\)"),
        ({"linear_before_reset": 2}, FastGRUError, r"linear_before_reset is 2; expected 0 or 1"),
        ({"direction": "backward"}, FastGRUError, r"direction is 'backward'; expected 'forward', 'reverse'"),
        ({"input_forget": 1}, NotImplementedError, r"attribute 'input_forget' is not one of ONNX GRU's"),
        (
            {"hidden_size": 7},
            FastGRUError,
            r"B has shape \(1, 30\); expected \(num_directions=1, "
            r"6\*hidden_size=42\)",
        ),
    ],
)
def test_attribute_errors(attrs, error, message):
    rng = np.random.default_rng(8)
    direction = "bidirectional" if attrs.get("direction") == "bidirectional" else "forward"
    W, R, B = random_weights(rng, direction=direction)
    with pytest.raises(error, match=f"^from_onnx: GRU node 'gru': {message}"):
        fastgru.from_onnx(gru_model(W, R, B, **attrs))


def test_weight_shape_errors_name_the_node():
    rng = np.random.default_rng(9)
    W, R, B = random_weights(rng)
    with pytest.raises(
        FastGRUError,
        match=r"^from_onnx: GRU node 'gru': GRUSequence: W has shape \(1, 15, 3\); "
        r"expected \(num_directions=2",
    ):
        fastgru.from_onnx(gru_model(W, R, np.concatenate([B, B]), direction="bidirectional"))
    with pytest.raises(
        FastGRUError,
        match=r"GRU node 'gru': B has shape \(1, 29\); expected \(num_directions=1, "
        r"6\*hidden_size=30\)",
    ):
        fastgru.from_onnx(gru_model(W, R, B[:, 1:]))
    with pytest.raises(TypeError, match=r"GRU node 'gru': GRUSequence: R is float64 but W is float32"):
        fastgru.from_onnx(gru_model(W, R.astype(np.float64), B))


def test_not_a_model():
    with pytest.raises(TypeError, match=r"from_onnx: got dict; expected an onnx.ModelProto or the path"):
        fastgru.from_onnx({})


@pytest.mark.parametrize("layout", [0, 1])
def test_call_errors_use_onnx_shapes(layout):
    rng = np.random.default_rng(10)
    W, R, B = random_weights(rng, direction="bidirectional")
    gru = fastgru.from_onnx(gru_model(W, R, B, direction="bidirectional", layout=layout))
    order = "seq_length, batch_size" if layout == 0 else "batch_size, seq_length"
    with pytest.raises(
        FastGRUError,
        match=rf"OnnxGRU: X has rank 2 \(shape \(6, 3\)\); expected \({order}, "
        rf"input_size=3\) \(layout={layout}\)",
    ):
        gru(np.zeros((6, 3), np.float32))
    X = np.zeros((S, N, I) if layout == 0 else (N, S, I), np.float32)
    what = "num_directions, batch_size" if layout == 0 else "batch_size, num_directions"
    expected = r"\(2, 4, 5\)" if layout == 0 else r"\(4, 2, 5\)"
    with pytest.raises(
        FastGRUError,
        match=rf"initial_h has shape \(1, 4, 5\); expected \({what}, hidden_size\) = "
        rf"{expected}",
    ):
        gru(X, initial_h=np.zeros((1, 4, 5), np.float32))
    with pytest.raises(
        FastGRUError,
        match=r"GRUSequence: sequence_lengths\[0\] is 7; expected 0 <= sequence_lengths "
        r"<= seq_length=6",
    ):
        gru(X, sequence_lens=np.array([7, 1, 1, 1]))
    with pytest.raises(TypeError, match=r"GRUSequence: X is float64 but the op's W is float32"):
        gru(X.astype(np.float64))


def stacked_grus(rng, layout, directions, hidden, inputs=3, lengths=True, join=None):
    """A graph of GRU nodes feeding each other as torch exports a stack: for layout 0, Squeeze(1) after
    a forward or reverse node and Transpose(0, 2, 1, 3) + Reshape(0, 0, -1) after a bidirectional one;
    for layout 1, Reshape(0, 0, -1). ``join`` replaces the first join's nodes (a wrong one)."""
    nodes, weights, inputs_info = [], [], [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)]
    if lengths:
        inputs_info.append(helper.make_tensor_value_info("lens", TensorProto.INT32, None))
    outputs, x, size = [], "X", inputs
    for k, (direction, h) in enumerate(zip(directions, hidden)):
        d = 2 if direction == "bidirectional" else 1
        for name, shape in (("W", (d, 3 * h, size)), ("R", (d, 3 * h, h)), ("B", (d, 6 * h))):
            weights.append(numpy_helper.from_array(uniform(rng, shape, 1 / np.sqrt(h)), f"{name}{k}"))
        inputs_info.append(helper.make_tensor_value_info(f"h0_{k}", TensorProto.FLOAT, None))
        node_inputs = [x, f"W{k}", f"R{k}", f"B{k}", "lens" if lengths else "", f"h0_{k}"]
        nodes.append(
            helper.make_node(
                "GRU",
                node_inputs,
                [f"Y{k}", f"Yh{k}"],
                name=f"gru{k}",
                hidden_size=h,
                direction=direction,
                layout=layout,
            )
        )
        outputs.append(helper.make_tensor_value_info(f"Yh{k}", TensorProto.FLOAT, None))
        if k == len(directions) - 1:
            outputs.append(helper.make_tensor_value_info(f"Y{k}", TensorProto.FLOAT, None))
            break
        weights.append(numpy_helper.from_array(np.array([0, 0, -1], np.int64), f"shape{k}"))
        weights.append(numpy_helper.from_array(np.array([1], np.int64), f"axis{k}"))
        if join is not None and k == 0:
            moves = join(k)
        elif layout == 1:
            moves = [helper.make_node("Reshape", [f"Y{k}", f"shape{k}"], [f"X{k + 1}"])]
        elif d == 1:
            moves = [helper.make_node("Squeeze", [f"Y{k}", f"axis{k}"], [f"X{k + 1}"])]
        else:
            moves = [
                helper.make_node("Transpose", [f"Y{k}"], [f"T{k}"], perm=[0, 2, 1, 3]),
                helper.make_node("Reshape", [f"T{k}", f"shape{k}"], [f"X{k + 1}"]),
            ]
        nodes += moves
        x, size = f"X{k + 1}", d * h
    graph = helper.make_graph(nodes, "stack", inputs_info, outputs, weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize(
    "layout, directions",
    [(0, ("bidirectional", "reverse", "forward")), (0, ("forward", "forward")), (1, ("forward", "bidirectional"))],
)
def test_chained_gru_nodes_are_a_stack_that_matches_onnxruntime(layout, directions):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(20)
    hidden = (5, 7, 4)[: len(directions)]
    model = stacked_grus(rng, layout, directions, hidden)
    stack = fastgru.from_onnx(model)
    assert isinstance(stack, fastgru.OnnxGRUStack)
    assert [node.node_name for node in stack.nodes] == [f"gru{k}" for k in range(len(directions))]
    s, n = 6, 4
    X = rng.standard_normal((s, n, 3) if layout == 0 else (n, s, 3)).astype(np.float32)
    lens = np.array([6, 2, 1, 5] if layout == 0 else [6] * 4, np.int32)  # onnx.reference ignores sequence_lens
    h0 = []
    for direction, h in zip(directions, hidden):
        d = 2 if direction == "bidirectional" else 1
        h0.append(rng.standard_normal((d, n, h) if layout == 0 else (n, d, h)).astype(np.float32))
    feed = {"X": X, "lens": lens, **{f"h0_{k}": h for k, h in enumerate(h0)}}
    if layout == 0:
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    else:  # ONNX Runtime has no batch-major GRU: onnx's own reference
        from onnx.reference import ReferenceEvaluator

        session = ReferenceEvaluator(model)
        session.get_outputs = lambda: model.graph.output
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))
    Y, Y_h = stack(X, lens, h0)
    np.testing.assert_allclose(Y, expected[f"Y{len(directions) - 1}"], rtol=1e-5, atol=1e-6)
    for k, got in enumerate(Y_h):
        np.testing.assert_allclose(got, expected[f"Yh{k}"], rtol=1e-5, atol=1e-6)
    # the bits of the nodes' ops run one by one (node k's Y as node k+1's X)
    ops = [fastgru.from_onnx(model, f"gru{k}") for k in range(len(directions))]
    x = X
    for k, op in enumerate(ops):
        y, y_h = op(x, lens, h0[k])
        np.testing.assert_array_equal(Y_h[k], y_h)
        x = y.transpose(0, 2, 1, 3) if layout == 0 else y  # (S, N, D, H) or (N, S, D, H)
        x = x.reshape(*x.shape[:2], -1)
    np.testing.assert_array_equal(Y, y)


def test_gru_nodes_joined_otherwise_are_not_a_stack():
    rng = np.random.default_rng(21)

    def wrong(k):  # batch-major where the next node reads time-major
        return [
            helper.make_node("Transpose", [f"Y{k}"], [f"T{k}"], perm=[2, 0, 1, 3]),
            helper.make_node("Reshape", [f"T{k}", f"shape{k}"], [f"X{k + 1}"]),
        ]

    model = stacked_grus(rng, 0, ("bidirectional", "forward"), (5, 4), join=wrong)
    with pytest.raises(FastGRUError, match="they do not form one stack"):
        fastgru.from_onnx(model)
    model = stacked_grus(rng, 0, ("forward", "forward"), (5, 4))
    model.graph.node[-1].input[4] = ""  # the second node without the first's sequence_lens
    with pytest.raises(FastGRUError, match="they do not form one stack"):
        fastgru.from_onnx(model)
    assert fastgru.from_onnx(model, "gru1").node_name == "gru1"


def test_torch_export_of_a_multi_layer_gru_is_a_stack():
    torch = pytest.importorskip("torch")
    import io
    import warnings

    torch.manual_seed(0)
    gru = torch.nn.GRU(8, 6, num_layers=3, bidirectional=True).eval()
    x = torch.randn(5, 2, 8)
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # the legacy exporter's deprecation, and its warning on batch sizes
        warnings.simplefilter("ignore")
        torch.onnx.export(gru, (x,), buffer, dynamo=False)
    stack = fastgru.from_onnx(onnx.load_from_string(buffer.getvalue()))
    assert isinstance(stack, fastgru.OnnxGRUStack) and stack.stack.num_layers == 3
    Y, Y_h = stack(x.numpy())
    with torch.inference_mode():
        want, h_n = gru(x)
    np.testing.assert_allclose(Y.transpose(0, 2, 1, 3).reshape(5, 2, 12), want.numpy(), atol=1e-6)
    np.testing.assert_allclose(np.concatenate(Y_h), h_n.numpy(), atol=1e-6)


@pytest.mark.parametrize("weight_dtype", ["bfloat16", "int8"])
def test_compact_weights(weight_dtype):
    """``weight_dtype=`` reaches the node's op (and every node of a stack's): ONNX Runtime's results
    within the compact weights' error, not the exact import's bits."""
    rng = np.random.default_rng(9)
    W, R, B = random_weights(rng, direction="bidirectional")
    kwargs = {"direction": "bidirectional", "linear_before_reset": 1, "hidden_size": H}
    model = gru_model(W, R, B, layout=0, **kwargs)
    feeds = {"X": rng.standard_normal((S, N, I)).astype(np.float32)}
    gru = fastgru.from_onnx(model, weight_dtype=weight_dtype)
    assert gru.op.weight_dtype == weight_dtype
    got, exact = gru(**feeds), fastgru.from_onnx(model)(**feeds)
    for g, w, e in zip(got, run_ort(model, feeds), exact, strict=True):
        np.testing.assert_allclose(g, w, atol=3e-2)
        assert not np.array_equal(g, e)


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("n", [1, 4])
def test_a_stream_of_a_node_or_a_stack_gives_the_bits_of_one_call(layout, n):
    rng = np.random.default_rng(21)
    hidden = (5, 7)
    model = stacked_grus(rng, layout, ("forward", "forward"), hidden)
    s = 6
    X = rng.standard_normal((s, n, 3) if layout == 0 else (n, s, 3)).astype(np.float32)
    lens = np.array([6, 2, 0, 5][:n], np.int32)
    h0 = [rng.standard_normal((1, n, h) if layout == 0 else (n, 1, h)).astype(np.float32) for h in hidden]
    t = 0 if layout == 0 else 1  # X's and Y's time axis
    for gru, initial_h in ((fastgru.from_onnx(model), h0), (fastgru.from_onnx(model, "gru0"), h0[0])):
        Y, Y_h = gru(X, lens, initial_h)
        stream = gru.stream(lens, initial_h)
        parts = [stream(np.take(X, range(a, b), axis=t)) for a, b in ((0, 1), (1, 4), (4, 6))]
        np.testing.assert_array_equal(np.concatenate(parts, axis=t), Y)
        for got, want in zip(
            stream.Y_h if isinstance(Y_h, list) else [stream.Y_h], Y_h if isinstance(Y_h, list) else [Y_h]
        ):
            np.testing.assert_array_equal(got, want)
        framed = gru.stream(lens, initial_h)  # frame by frame into out
        for step in range(s):
            frame = np.ascontiguousarray(np.take(X, [step], axis=t))
            out = np.full(np.take(Y, [step], axis=t).shape, np.nan, np.float32)
            assert framed(frame, out=out) is out
            np.testing.assert_array_equal(out, np.take(Y, [step], axis=t))
        assert framed.steps == s


def test_a_stream_refuses_what_it_cannot_stream():
    rng = np.random.default_rng(22)
    model = stacked_grus(rng, 0, ("forward", "bidirectional"), (5, 7))
    with pytest.raises(FastGRUError, match="OnnxGRUStack.stream: node 'gru1' has direction 'bidirectional'"):
        fastgru.from_onnx(model).stream()
    stream = fastgru.from_onnx(model, "gru0").stream()
    with pytest.raises(FastGRUError, match="OnnxGRU stream: no chunk fed yet"):
        _ = stream.Y_h
    stream(np.zeros((2, 3, 3), np.float32))
    with pytest.raises(FastGRUError, match=r"OnnxGRU stream: out has shape \(2, 1, 3, 4\); expected \(2, 1, 3, 5\)"):
        stream(np.zeros((2, 3, 3), np.float32), out=np.empty((2, 1, 3, 4), np.float32))


def test_a_stream_in_layout_1_into_out_allocates_no_array():
    from test_allocation import _numpy_allocations

    rng = np.random.default_rng(23)
    stream = fastgru.from_onnx(stacked_grus(rng, 1, ("forward", "forward"), (5, 7))).stream()
    frame, out = rng.standard_normal((2, 1, 3)).astype(np.float32), np.empty((2, 1, 1, 7), np.float32)
    assert _numpy_allocations(lambda: stream(frame, out=out)) == (0, 0)
