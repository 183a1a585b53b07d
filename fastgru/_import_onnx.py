"""from_onnx: the GRU node of an ONNX model as a prepared GRUSequence op, called as ONNX calls it.

fastgru reads every version of ONNX's GRU: GRU-1, 3, 7, 14 and 22 (the version in force is the
newest one not above the model's opset of the default domain). They compute the same thing and
differ only in their attributes and types: GRU-3 adds linear_before_reset; output_sequence (GRU-1
and GRU-3), which only says whether Y is an optional output, is gone from GRU-7; GRU-14 adds
layout; GRU-22 adds bfloat16. An attribute or a type the node's version does not have is an
error. ONNX's GRU is GRUSequence-5 up to three things, translated here once:

- B is (num_directions, 6*hidden_size) = [Wbz, Wbr, Wbh, Rbz, Rbr, Rbh]; fastgru's B is
  [Wbz+Rbz, Wbr+Rbr, Wbh+Rbh] for linear_before_reset=0 and [Wbz+Rbz, Wbr+Rbr, Wbh, Rbh] for 1
  (docs/semantics.md, "The gates");
- ``layout`` 0 is time-major: X (S, N, I), initial_h (D, N, H), Y (S, D, N, H), Y_h (D, N, H);
  layout 1 is batch-major: X (N, S, I), initial_h (N, D, H), Y (N, S, D, H), Y_h (N, D, H);
- activations are listed per direction (2, or 4 when bidirectional) with capitalised names.

onnx is imported only inside :func:`from_onnx`.
"""

import math
import os

import numpy as np

from . import _onnx_stack
from ._codes import ACTIVATIONS as CODES
from ._import_common import about, fused_bias
from ._ops import Described, GRUSequence
from ._validate import DIRECTIONS, FastGRUError

_INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h")
_COMMON = frozenset({"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size"})
#: The attributes of each version of ONNX's GRU (the operator changelog of the default domain).
#: output_sequence (GRU-1 and GRU-3) says whether Y is an optional output: it changes no value.
_VERSIONS = {
    1: _COMMON | {"output_sequence"},
    3: _COMMON | {"linear_before_reset", "output_sequence"},
    7: _COMMON | {"linear_before_reset"},
    14: _COMMON | {"layout", "linear_before_reset"},
    22: _COMMON | {"layout", "linear_before_reset"},
}
_ATTRIBUTES = frozenset().union(*_VERSIONS.values())
#: The version from which a T1 dtype is allowed (float16, float32 and float64 from GRU-1).
_DTYPE_SINCE = {"bfloat16": 22}


class OnnxGRU(Described):
    """An ONNX GRU node on fastgru's kernels: ``Y, Y_h = gru(X, sequence_lens=None, initial_h=None)``.

    Made by :func:`fastgru.from_onnx`. Shapes are ONNX's for the node's ``layout`` (S seq_length,
    N batch_size, I input_size, D num_directions, H hidden_size):

    ========  ==========  ==========  ============  ==========
    layout    X           initial_h   Y             Y_h
    ========  ==========  ==========  ============  ==========
    0         (S, N, I)   (D, N, H)   (S, D, N, H)  (D, N, H)
    1         (N, S, I)   (N, D, H)   (N, S, D, H)  (N, D, H)
    ========  ==========  ==========  ============  ==========

    ``sequence_lens`` (N integers) defaults to the node's own constant when it has one, else to
    full length; ``initial_h`` likewise to the node's constant, else zeros. Y is zero past each
    row's length and Y_h is the state after its last valid step (zero for length 0), as ONNX
    Runtime computes (docs/semantics.md, "Sequences"). Results are NumPy arrays of the weights' dtype.

    Attributes
    ----------
    op : fastgru.GRUSequence
        The prepared op, with fastgru's B and OpenVINO's shapes.
    node_name : str
        The node's name (may be empty).
    layout : int
        0 or 1, as above.
    opset : int
        The model's opset of the default domain.
    version : int
        The version of ONNX's GRU in force at that opset: 1, 3, 7, 14 or 22.
    """

    def __init__(self, op, *, node_name, layout, opset, version, sequence_lens=None, initial_h=None):
        self.op = op
        self.node_name = node_name
        self.layout = layout
        self.opset = opset
        self.version = version
        self._sequence_lens = sequence_lens
        self._initial_h = initial_h

    @property
    def spec(self):
        """The checked attributes of the op (hidden_size, input_size and dtype come from it)."""
        return self.op.spec

    @property
    def direction(self) -> str:
        return self.spec.direction

    def __call__(self, X, sequence_lens=None, initial_h=None):
        x = self._batch_major(X, "OnnxGRU", f"layout={self.layout}")
        if sequence_lens is None:
            sequence_lens = self._sequence_lens  # None again: every step of every row, as the op takes it
        h0 = self._state(initial_h, x.shape[0])
        Y, Ho = self.op(x, h0, sequence_lens)  # (N, D, S, H), (N, D, H)
        if self.layout == 0:
            return np.ascontiguousarray(Y.transpose(2, 1, 0, 3)), np.ascontiguousarray(Ho.transpose(1, 0, 2))
        return np.ascontiguousarray(Y.transpose(0, 2, 1, 3)), Ho

    def stream(self, sequence_lens=None, initial_h=None):
        """An :class:`OnnxStream`: this node (forward) fed a long sequence chunk by chunk, its state
        carried between chunks; ``sequence_lens`` and ``initial_h`` as the call takes them, for the
        whole sequence."""
        return _onnx_stack.OnnxStream(self, sequence_lens, initial_h)

    def _stream_of(self, n, sequence_lens, initial_h):
        lengths = self._sequence_lens if sequence_lens is None else sequence_lens
        return self.op.stream(self._state(initial_h, n), lengths)

    def _y_h(self, Ho):
        """Y_h in the node's layout, of the op's state (N, D, H)."""
        return np.ascontiguousarray(Ho.transpose(1, 0, 2)) if self.layout == 0 else Ho

    def _batch_major(self, X, where, which):
        """X in the node's layout as (N, S, I), a view; a rank other than 3 is an error of ``where``."""
        X = np.asarray(X)
        if X.ndim != 3:
            order = "seq_length, batch_size" if self.layout == 0 else "batch_size, seq_length"
            raise FastGRUError(
                f"{where}: X has rank {X.ndim} (shape {X.shape}); expected ({order}, "
                f"input_size={self.input_size}) ({which})"
            )
        return X.transpose(1, 0, 2) if self.layout == 0 else X

    def _state(self, initial_h, n):
        """The op's initial state (N, D, H) from ``initial_h`` in the node's layout, else the node's
        constant, else zeros."""
        d, hidden = self.op.spec.num_directions, self.hidden_size
        if initial_h is None:
            initial_h = self._initial_h
        if initial_h is None:
            return np.zeros((n, d, hidden), dtype=self.dtype)
        initial_h = np.asarray(initial_h)
        expected = (d, n, hidden) if self.layout == 0 else (n, d, hidden)
        if initial_h.shape != expected:
            what = "num_directions, batch_size" if self.layout == 0 else "batch_size, num_directions"
            raise FastGRUError(
                f"OnnxGRU {self.node_name!r}: initial_h has shape {initial_h.shape}; expected ({what}, "
                f"hidden_size) = {expected} (layout={self.layout})"
            )
        return initial_h.transpose(1, 0, 2) if self.layout == 0 else initial_h

    def __repr__(self):
        return (
            f"OnnxGRU(node_name={self.node_name!r}, version={self.version}, layout={self.layout}, "
            f"hidden_size={self.hidden_size}, "
            f"input_size={self.input_size}, direction={self.direction!r}, "
            f"linear_before_reset={self.op.spec.linear_before_reset}, dtype={self.dtype.name})"
        )


def from_onnx(model_or_path, node_name=None, *, weight_dtype=None):
    """The GRU node of an ONNX model as an :class:`OnnxGRU` running on fastgru's kernels, or its GRU
    nodes as an :class:`OnnxGRUStack` when they feed each other.

    Parameters
    ----------
    model_or_path : onnx.ModelProto, str or os.PathLike
        The model, or the path of an ``.onnx`` file (external data next to it is loaded).
    node_name : str, optional
        The GRU node to take, by its name or one of its output names; needed only when the graph
        has several that do not form a stack. Only the main graph is searched, not the bodies of
        Loop, If or Scan.
    weight_dtype : {None, 'bfloat16', 'int8'}, optional
        Store W and R compact, read and computed in float32 (see :class:`fastgru.GRUCell`); None
        (the default): exact.

    Returns
    -------
    OnnxGRU or OnnxGRUStack
        ``Y, Y_h = gru(X, sequence_lens=None, initial_h=None)`` with ONNX's shapes for the node's
        layout; ``gru.op`` is the prepared :class:`fastgru.GRUSequence`. When the graph has several
        GRU nodes and no ``node_name``, and each node's X is the previous node's Y with its
        directions side by side (joined by Squeeze, Transpose or Reshape nodes only, as torch
        exports a multi-layer nn.GRU) and all share one sequence_lens: an
        :class:`OnnxGRUStack`, the nodes run as one :class:`fastgru.GRUStack`,
        ``Y, [Y_h, ...] = stack(X, sequence_lens=None, initial_h=None)``.

    Notes
    -----
    Versions: GRU-1, 3, 7, 14 and 22, every version ONNX has defined, picked by the model's opset
    of the default domain (1-2, 3-6, 7-13, 14-21, 22 and later, up to the newest opset the
    installed onnx package knows). Each attribute must belong to that version: linear_before_reset
    from GRU-3, layout from GRU-14, output_sequence in GRU-1 and GRU-3 only (it changes no value);
    bfloat16 weights from GRU-22.

    W, R and B must be constants: initializers (also those listed as graph inputs, as older
    exporters write them) or Constant nodes. sequence_lens and initial_h may come from anywhere:
    when they are constants, they are the call's defaults. Supported attributes: direction,
    hidden_size, layout (0, 1), linear_before_reset, clip (> 0; absent means none) and activations
    from Sigmoid, Tanh and Relu, the same pair for both directions of a bidirectional node.
    activation_alpha and activation_beta are accepted and unused: none of these functions takes one.

    Raises
    ------
    FastGRUError
        No GRU node, several that are not a stack and no ``node_name``, an unknown ``node_name``,
        no opset of the default domain or one the installed onnx does not know, an attribute or
        weight type that the node's GRU version does not have, weights that are not constants, a B
        of the wrong shape, or an attribute value ONNX does not define.
    NotImplementedError
        An activation other than Sigmoid, Tanh and Relu, or a different pair per direction.

    Examples
    --------
    >>> import pytest; onnx = pytest.importorskip("onnx")
    >>> import numpy as np, fastgru
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> rng = np.random.default_rng(0)
    >>> H, I = 4, 3
    >>> weights = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)
    ...            for name, shape in [("W", (1, 3 * H, I)), ("R", (1, 3 * H, H)), ("B", (1, 6 * H))]]
    >>> node = helper.make_node("GRU", ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=H, linear_before_reset=1)
    >>> graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)],
    ...                           [helper.make_tensor_value_info(y, TensorProto.FLOAT, None) for y in ("Y", "Y_h")],
    ...                           weights)
    >>> gru = fastgru.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]))
    >>> gru.version
    22
    >>> Y, Y_h = gru(rng.standard_normal((5, 2, I), dtype=np.float32))    # X (seq_length, batch_size, input_size)
    >>> Y.shape, Y_h.shape
    ((5, 1, 2, 4), (1, 2, 4))
    """
    model = _load(model_or_path)
    graph = model.graph
    opset, version = _gru_version(model)
    constants = _constants(graph)
    grus = _find_nodes(graph, node_name)
    if len(grus) == 1:
        return _node(graph, grus[0], constants, opset, version, weight_dtype)
    found = _onnx_stack.chain(graph, grus)
    if found is None or len({tuple(node.input[4:5]) for node in grus}) > 1:  # one sequence_lens for all
        raise _onnx_stack.not_a_stack(grus, _label)
    order, joins = found
    nodes = [_node(graph, node, constants, opset, version, weight_dtype) for node in order]
    if not _onnx_stack.check_joins(nodes, joins, constants, _to_array):
        raise _onnx_stack.not_a_stack(grus, _label)
    return _onnx_stack.OnnxGRUStack(nodes, nodes[0]._sequence_lens)


def _node(graph, node, constants, opset, version, weight_dtype=None):
    """The OnnxGRU of one GRU node."""
    where = f"from_onnx: GRU node {node.name!r}"
    inputs = dict(zip(_INPUTS, node.input))
    inputs = {k: v for k, v in inputs.items() if v}
    for name in ("X", "W", "R"):
        if name not in inputs:
            raise FastGRUError(f"{where}: has no input {name}; ONNX's GRU requires X, W and R")
    W, R = (_constant(graph, constants, where, name, inputs[name]) for name in ("W", "R"))
    B = _constant(graph, constants, where, "B", inputs["B"]) if "B" in inputs else None
    extras = {name: _to_array(constants.get(inputs.get(name))) for name in ("sequence_lens", "initial_h")}
    attrs = _attributes(node, where, opset, version)
    for name, value in (("W", W), ("R", R), ("B", B)):
        since = _DTYPE_SINCE.get(getattr(getattr(value, "dtype", None), "name", None))
        if since is not None and version < since:
            raise FastGRUError(
                f"{where}: {name} is {value.dtype.name}, a type of GRU-{since} (opset {since}) and "
                f"later; the model imports opset {opset}, whose GRU is GRU-{version}"
            )
    d = DIRECTIONS[attrs["direction"]]
    hidden = attrs["hidden_size"] if attrs["hidden_size"] is not None else (R.shape[-1] if R.ndim else 0)
    B = _fastgru_bias(B, W.dtype, d, hidden, attrs["linear_before_reset"], where)
    with about(where):
        op = GRUSequence(
            W,
            R,
            B,
            hidden_size=attrs["hidden_size"],
            direction=attrs["direction"],
            activations=attrs["activations"],
            clip=attrs["clip"],
            linear_before_reset=attrs["linear_before_reset"],
            weight_dtype=weight_dtype,
        )
    return OnnxGRU(op, node_name=node.name, layout=attrs["layout"], opset=opset, version=version, **extras)


def _load(model_or_path):
    if isinstance(model_or_path, (str, os.PathLike)):
        import onnx

        return onnx.load(os.fspath(model_or_path))
    if not hasattr(model_or_path, "graph"):
        raise TypeError(
            f"from_onnx: got {type(model_or_path).__name__}; expected an onnx.ModelProto or the path of an .onnx file"
        )
    return model_or_path


def _gru_version(model):
    """(opset, GRU version) of the model: its opset of the default domain and the newest GRU
    version not above it."""
    from onnx import defs

    opsets = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if not opsets:
        domains = ", ".join(repr(o.domain) for o in model.opset_import) or "none"
        raise FastGRUError(
            f"from_onnx: the model imports no opset of the default domain '' (ai.onnx), which "
            f"defines GRU (its opset imports: {domains})"
        )
    opset = max(opsets)
    newest = defs.onnx_opset_version()
    if not 1 <= opset <= newest:
        raise FastGRUError(
            f"from_onnx: the model imports opset {opset} of the default domain; the installed onnx "
            f"{_onnx_version()} knows opsets 1 to {newest}, so which GRU version that opset holds is "
            "unknown (upgrade onnx)"
        )
    version = defs.get_schema("GRU", opset, "").since_version
    if version not in _VERSIONS:
        *older, newest_gru = _VERSIONS
        raise FastGRUError(
            f"from_onnx: the model imports opset {opset}, whose GRU is GRU-{version}; fastgru reads "
            f"GRU-{', '.join(map(str, older))} and {newest_gru}"
        )
    return opset, version


def _onnx_version():
    import onnx

    return onnx.__version__


def _label(node):
    return f"{node.name!r} (outputs {', '.join(o for o in node.output if o)})"


def _find_nodes(graph, node_name):
    """The GRU node named ``node_name``, or every GRU node of the graph when it is None."""
    grus = [n for n in graph.node if n.op_type == "GRU" and n.domain in ("", "ai.onnx")]
    if not grus:
        kinds = sorted({n.op_type for n in graph.node})
        raise FastGRUError(f"from_onnx: the graph has no GRU node (its nodes: {', '.join(kinds) or 'none'})")
    if node_name is None:
        return grus
    for n in grus:
        if node_name == n.name or node_name in n.output:
            return [n]
    raise FastGRUError(f"from_onnx: no GRU node named {node_name!r}; the GRU nodes are {'; '.join(map(_label, grus))}")


def _constants(graph):
    """{name: TensorProto or ndarray} of the initializers and the outputs of Constant nodes with a
    tensor value; :func:`_to_array` converts the few that the GRU node reads."""
    values = {t.name: t for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value":
                    values[n.output[0]] = a.t
                elif a.name in ("value_float", "value_floats"):
                    values[n.output[0]] = np.array(a.f if a.name == "value_float" else list(a.floats), np.float32)
                elif a.name in ("value_int", "value_ints"):
                    values[n.output[0]] = np.array(a.i if a.name == "value_int" else list(a.ints), np.int64)
    return values


def _to_array(value):
    """An ndarray of a value of :func:`_constants` (None stays None)."""
    if value is None or isinstance(value, np.ndarray):
        return value
    from onnx import numpy_helper

    return numpy_helper.to_array(value)


def _constant(graph, constants, where, input_name, value_name):
    """The constant value of the GRU node's input ``input_name``, else an error saying where it comes from."""
    if value_name in constants:
        return _to_array(constants[value_name])
    if any(i.name == value_name for i in graph.input):
        source = "a graph input"
    else:
        producers = [n for n in graph.node if value_name in n.output]
        source = (
            f"the output of node {producers[0].name!r} ({producers[0].op_type})"
            if producers
            else "not defined in the graph"
        )
    raise FastGRUError(
        f"{where}: {input_name} is {value_name!r}, {source}; fastgru needs constant weights "
        "(initializers or Constant nodes). Fold the graph's constants first (e.g. onnxsim), or make "
        "it an initializer"
    )


def _attributes(node, where, opset, version):
    from onnx import helper

    raw = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    for name in raw:
        if name not in _ATTRIBUTES:
            raise NotImplementedError(
                f"{where}: attribute {name!r} is not one of ONNX GRU's ({', '.join(sorted(_ATTRIBUTES))})"
            )
        if name not in _VERSIONS[version]:
            versions = [v for v, names in _VERSIONS.items() if name in names]
            has = (
                f"GRU-{versions[0]} and later"
                if versions[-1] == max(_VERSIONS)
                else " and ".join(f"GRU-{v}" for v in versions) + " only"
            )
            raise FastGRUError(
                f"{where}: attribute {name!r} does not exist in opset {opset}, whose GRU is "
                f"GRU-{version}; it is an attribute of {has}"
            )
    text = {k: v.decode() if isinstance(v, bytes) else v for k, v in raw.items()}
    direction = text.get("direction", "forward")
    if direction not in DIRECTIONS:
        raise FastGRUError(f"{where}: direction is {direction!r}; expected 'forward', 'reverse' or 'bidirectional'")
    layout = text.get("layout", 0)
    if layout not in (0, 1):
        raise FastGRUError(f"{where}: layout is {layout!r}; expected 0 (time-major) or 1 (batch-major)")
    lbr = text.get("linear_before_reset", 0)
    if lbr not in (0, 1):
        raise FastGRUError(f"{where}: linear_before_reset is {lbr!r}; expected 0 or 1")
    clip = text.get("clip")
    if clip is not None and not clip > 0:  # also NaN
        raise FastGRUError(
            f"{where}: clip is {clip!r}; ONNX clips to [-clip, clip] and needs clip > 0 (leave it out for no clipping)"
        )
    return {
        "direction": direction,
        "layout": layout,
        "linear_before_reset": bool(lbr),
        "clip": math.inf if clip is None else float(clip),
        "hidden_size": text.get("hidden_size"),
        "activations": _activations(text.get("activations"), DIRECTIONS[direction], where),
    }


def _activations(names, d, where):
    """fastgru's (f, g) from ONNX's list: 2 names, or 4 (f, g per direction) when bidirectional."""
    if names is None:
        return ("sigmoid", "tanh")
    names = [n.decode() if isinstance(n, bytes) else n for n in names]
    if len(names) != 2 * d:
        raise FastGRUError(
            f"{where}: activations is {names!r}; expected {2 * d} names (f and g"
            f"{' for each direction' if d == 2 else ''})"
        )
    for i, name in enumerate(names):
        if name.lower() not in CODES:  # fastgru's names are ONNX's in lower case
            raise NotImplementedError(
                f"{where}: activations[{i}] is {name!r}; fastgru implements Sigmoid, Tanh and Relu"
            )
    pairs = {tuple(n.lower() for n in names[i : i + 2]) for i in range(0, len(names), 2)}
    if len(pairs) > 1:
        raise NotImplementedError(
            f"{where}: activations {names!r} give the two directions different functions; "
            "fastgru runs both directions with one pair (f, g)"
        )
    return pairs.pop()


def _fastgru_bias(B, dtype, d, hidden, lbr, where):
    """fastgru's B (D, 3H or 4H) from ONNX's (D, 6H) = [Wb | Rb]; zeros without B."""
    gates = 4 if lbr else 3
    if B is None:
        return np.zeros((d, gates * hidden), dtype=dtype)
    if B.shape != (d, 6 * hidden):
        raise FastGRUError(
            f"{where}: B has shape {B.shape}; expected (num_directions={d}, 6*hidden_size="
            f"{6 * hidden}), [Wb | Rb] (hidden_size from the attribute or R.shape[-1])"
        )
    return fused_bias(B[:, : 3 * hidden], B[:, 3 * hidden :], lbr)
