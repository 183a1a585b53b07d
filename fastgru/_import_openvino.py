"""from_openvino: the GRU layers of an OpenVINO IR (.xml + .bin) as prepared ops, read with the
standard library and NumPy only (openvino is never imported).

An IR's XML lists layers (``<layer id name type version>`` with attributes in ``<data>`` and
numbered ``<port>``s) and edges (``from-layer/from-port -> to-layer/to-port``). A Const layer's
``<data>`` gives ``element_type``, ``shape``, ``offset`` and ``size`` of its bytes in the .bin.
``openvino.save_model`` compresses f32 weights to f16 by default and writes Const (f16) ->
Convert (f32) -> GRU; that decompression chain (Convert layers only) is followed.
"""

import functools
import os
import xml.etree.ElementTree as ET

import numpy as np

from ._import_common import about, joins_as_a_stack
from ._ops import AUGRUSequence, GRUCell, GRUSequence
from ._stack import GRUStack
from ._validate import FastGRUError

#: The layer types read, and the input port index of W, R and B (GRUSequence-5: X,
#: initial_hidden_state, sequence_lengths, W, R, B; GRUCell-3: X, initial_hidden_state, W, R, B;
#: AUGRUSequence: GRUSequence's then A).
_WEIGHT_PORTS = {"GRUSequence": (3, 4, 5), "GRUCell": (2, 3, 4), "AUGRUSequence": (3, 4, 5)}
_ATTRIBUTES = {
    "hidden_size",
    "direction",
    "linear_before_reset",
    "activations",
    "activations_alpha",
    "activations_beta",
    "clip",
}
#: What ie_internal_opset.AUGRUSequence may carry: its attributes are fixed (docs/semantics.md, "The gates").
_AUGRU_FIXED = {"direction": "forward", "linear_before_reset": False, "activations": ["sigmoid", "tanh"], "clip": 0.0}


@functools.cache
def _element_types():
    """{IR element_type: NumPy dtype}, made on first use (ml_dtypes is imported only then)."""
    types = {"f16": np.dtype(np.float16), "f32": np.dtype(np.float32), "f64": np.dtype(np.float64)}
    types.update(i32=np.dtype(np.int32), i64=np.dtype(np.int64))  # the shapes and axes of a stack's joins
    try:
        import ml_dtypes

        types["bf16"] = np.dtype(ml_dtypes.bfloat16)
    except ImportError:  # bfloat16 is optional (docs/semantics.md, "Types")
        pass
    return types


def from_openvino(xml_path, layer_name=None, *, bin_path=None, stack=False, weight_dtype=None):
    """The GRU layers of an OpenVINO IR as prepared ops, or as one :class:`fastgru.GRUStack`.

    Parameters
    ----------
    xml_path : str or os.PathLike
        The IR's ``.xml``.
    layer_name : str, optional
        Return only this layer's op (by its ``name`` in the XML).
    bin_path : str or os.PathLike, optional
        The weights; default: ``xml_path`` with the suffix ``.bin``.
    stack : bool, optional
        Return the IR's GRUSequence layers as one :class:`fastgru.GRUStack`: they must feed each
        other, each layer's X the previous layer's Y with its directions side by side (joined by
        Squeeze, Unsqueeze, Transpose or Reshape layers only, which are checked to move the data
        so, as ``openvino.convert_model`` writes a multi-layer torch.nn.GRU), with one
        sequence_lengths for all; else a FastGRUError says why not. The stack takes fastgru's
        layouts, which are OpenVINO's, and one state array for all layers (docs/guide/stacks.md).
    weight_dtype : {None, 'bfloat16', 'int8'}, optional
        Store W and R compact, read and computed in float32 (see :class:`fastgru.GRUCell`); None
        (the default): exact.

    Returns
    -------
    dict, op or GRUStack
        ``{layer name: op}`` for every GRUSequence (:class:`fastgru.GRUSequence`), GRUCell
        (:class:`fastgru.GRUCell`) and AUGRUSequence (:class:`fastgru.AUGRUSequence`, OpenVINO's
        layout) layer of the main graph (not of TensorIterator or Loop bodies), in the XML's order;
        or the one op of ``layer_name``. The ops take the layer's data inputs as OpenVINO does,
        e.g. ``Y, Ho = op(X, initial_hidden_state, sequence_lengths)``.

    Notes
    -----
    W, R and B must come from Const layers, directly or through Convert layers (f16 weights
    decompressed to f32, as ``openvino.save_model`` writes them); the op's dtype is the one the
    layer receives (the last Convert's ``destination_type``). Const element types: f16, f32, f64,
    and bf16 when ml_dtypes is installed. Attributes come from the layer's ``<data>``:
    hidden_size, direction, linear_before_reset, activations (sigmoid, tanh, relu), clip (0: none),
    and activations_alpha / activations_beta, accepted and unused as in OpenVINO.

    Raises
    ------
    FastGRUError
        No GRU layer in the IR, an unknown ``layer_name``, weights that are not Consts, a Const
        whose bytes do not fit its shape or the .bin, or an attribute value the op rejects.
    NotImplementedError
        An attribute fastgru does not know, a Const element type other than the above.

    Examples
    --------
    >>> import pytest; ov = pytest.importorskip("openvino")
    >>> import os, tempfile, numpy as np, fastgru
    >>> from openvino import opset15 as ops
    >>> rng = np.random.default_rng(0)
    >>> H, I = 4, 3
    >>> W, R, B = (rng.uniform(-0.5, 0.5, s).astype(np.float32) for s in [(1, 3 * H, I), (1, 3 * H, H), (1, 3 * H)])
    >>> X, H0, L = (ops.parameter(s, t) for s, t in [([2, 5, I], ov.Type.f32), ([2, 1, H], ov.Type.f32),
    ...                                                ([2], ov.Type.i32)])
    >>> gru = ops.gru_sequence(X, H0, L, ops.constant(W), ops.constant(R), ops.constant(B), H, "forward")
    >>> gru.set_friendly_name("gru")
    >>> path = os.path.join(tempfile.mkdtemp(), "model.xml")
    >>> ov.save_model(ov.Model(gru.outputs(), [X, H0, L]), path)
    >>> op = fastgru.from_openvino(path, "gru")
    >>> op
    GRUSequence(hidden_size=4, input_size=3, direction='forward', linear_before_reset=False, dtype=float32)
    >>> Y, Ho = op(rng.standard_normal((2, 5, I), dtype=np.float32), np.zeros((2, 1, H), np.float32), [5, 3])
    >>> Y.shape, Ho.shape
    ((2, 1, 5, 4), (2, 1, 4))
    """
    xml_path = os.fspath(xml_path)
    bin_path = os.fspath(bin_path) if bin_path is not None else os.path.splitext(xml_path)[0] + ".bin"
    ir = _IR(xml_path, bin_path)
    grus = [layer for layer in ir.layers.values() if layer.get("type") in _WEIGHT_PORTS]
    if not grus:
        raise FastGRUError(
            f"from_openvino: {xml_path} has no GRUSequence, GRUCell or AUGRUSequence layer (in its main graph)"
        )
    if stack:
        return _stack(ir, grus, weight_dtype)
    if layer_name is not None:
        chosen = [layer for layer in grus if layer.get("name") == layer_name]
        if not chosen:
            names = ", ".join(repr(layer.get("name")) for layer in grus)
            raise FastGRUError(
                f"from_openvino: {xml_path} has no GRU layer named {layer_name!r}; its GRU layers: {names}"
            )
        return _op(ir, chosen[0], weight_dtype)
    ops = {}
    for layer in grus:
        name = layer.get("name")
        if name in ops:
            raise FastGRUError(f"from_openvino: {xml_path} has several GRU layers named {name!r}")
        ops[name] = _op(ir, layer, weight_dtype)
    return ops


class _IR:
    """The layers and edges of an IR's main graph, and its Const values."""

    def __init__(self, xml_path, bin_path):
        self.xml_path, self.bin_path = xml_path, bin_path
        root = ET.parse(xml_path).getroot()
        if root.tag != "net" or root.find("layers") is None:
            raise FastGRUError(f"from_openvino: {xml_path} is not an OpenVINO IR (no <net><layers>)")
        self.layers = {layer.get("id"): layer for layer in root.find("layers")}
        edges = root.find("edges")
        self.sources = {
            (e.get("to-layer"), e.get("to-port")): (e.get("from-layer"), e.get("from-port"))
            for e in (edges if edges is not None else ())
        }

    def producer(self, layer, index):
        """The layer feeding input ``index`` of ``layer`` (None when not connected)."""
        return self.source(layer, index)[0]

    def source(self, layer, index):
        """(layer, its output port's id) feeding input ``index`` of ``layer``; (None, None) when not connected."""
        ports = layer.find("input")
        ports = list(ports) if ports is not None else []
        if index >= len(ports):
            return None, None
        from_layer, port = self.sources.get((layer.get("id"), ports[index].get("id")), (None, None))
        return self.layers.get(from_layer), port

    def constant(self, layer, what):
        """The value at ``layer``: a Const, through any number of Convert layers."""
        converts = []
        while layer is not None and layer.get("type") == "Convert":
            converts.append(layer)
            layer = self.producer(layer, 0)
        if layer is None or layer.get("type") != "Const":
            source = "nothing" if layer is None else f"layer {layer.get('name')!r} ({layer.get('type')})"
            raise FastGRUError(
                f"{what} comes from {source}; fastgru needs constant weights: a Const layer, "
                "optionally through Convert layers (f16 decompression)"
            )
        value = self._read(layer, what)
        for convert in reversed(converts):
            value = value.astype(
                self._dtype(_data(convert).get("destination_type"), f"{what} (Convert {convert.get('name')!r})")
            )
        return value

    def _read(self, const, what):
        data = _data(const)
        where = f"{what} (Const {const.get('name')!r})"
        dtype = self._dtype(data.get("element_type"), where)
        text = data.get("shape", "").strip()
        try:
            shape = tuple(int(s) for s in text.split(",")) if text else ()
            offset, size = int(data["offset"]), int(data["size"])
        except (KeyError, ValueError):
            raise FastGRUError(
                f"{where}: <data> has shape={text!r}, offset={data.get('offset')!r}, "
                f"size={data.get('size')!r}; expected integers"
            ) from None
        if size != int(np.prod(shape)) * dtype.itemsize:
            raise FastGRUError(
                f"{where}: size={size} bytes, but shape {shape} of {data.get('element_type')} "
                f"needs {int(np.prod(shape)) * dtype.itemsize}"
            )
        file_size = self._bin_size
        if offset < 0 or offset + size > file_size:
            raise FastGRUError(
                f"{where}: bytes {offset} to {offset + size} are past the end of {self.bin_path} ({file_size} bytes)"
            )
        raw = np.fromfile(self.bin_path, dtype=np.uint8, count=size, offset=offset)
        return raw.view(dtype).reshape(shape)  # IR data is little-endian, as x86 and Arm are

    @functools.cached_property
    def _bin_size(self):
        """The .bin's size in bytes, taken at the first Const read."""
        return os.path.getsize(self.bin_path)

    @staticmethod
    def _dtype(element_type, where):
        types = _element_types()
        if element_type not in types:
            raise NotImplementedError(
                f"{where}: element_type {element_type!r} is not supported; expected one of {', '.join(types)}"
            )
        return types[element_type]


#: The layers a join between two GRUSequence layers of a stack may have: they only move data.
_MOVES = ("Squeeze", "Unsqueeze", "Transpose", "Reshape")


def _stack(ir, grus, weight_dtype):
    """The GRUSequence layers ``grus`` as one GRUStack, if they form one (see ``from_openvino``)."""
    where = f"from_openvino: {ir.xml_path}"
    others = [layer.get("type") for layer in grus if layer.get("type") != "GRUSequence"]
    if others:
        raise FastGRUError(f"{where}: stack=True takes GRUSequence layers only; the IR also has {', '.join(others)}")
    feeds, joins = {}, {}  # layer id -> the GRUSequence whose Y feeds its X, and the layers between them
    for layer in grus:
        source, port = ir.source(layer, 0)
        join = []
        while source is not None and source.get("type") in _MOVES:
            join.append(source)
            source, port = ir.source(source, 0)
        if source is not None and source.get("type") == "GRUSequence" and port == source.find("output")[0].get("id"):
            feeds[source.get("id")], joins[layer.get("id")] = layer, join[::-1]
    starts = [layer for layer in grus if layer.get("id") not in joins]  # one, if they are a chain
    order = starts[:1]
    while len(starts) == 1 and len(order) <= len(grus) and order[-1].get("id") in feeds:
        order.append(feeds[order[-1].get("id")])
    names = ", ".join(repr(layer.get("name")) for layer in grus)
    why = (
        f"{where}: its GRUSequence layers ({names}) do not form one stack: each layer's X must be the previous "
        "layer's Y, its directions side by side, through Squeeze, Unsqueeze, Transpose or Reshape layers only, "
        "and all layers must take the same sequence_lengths"
    )
    lengths = {(id(source), port) for source, port in (ir.source(layer, 2) for layer in grus)}
    if len(order) != len(grus) or len(feeds) != len(joins) or len(lengths) != 1:
        raise FastGRUError(why)
    ops = [_op(ir, layer, weight_dtype) for layer in order]
    dims = [int(dim.text) for dim in order[0].find("input")[0]]  # X (N, S, I); -1 for a dynamic size
    rows, steps = (size if size > 0 else None for size in dims[:2]) if len(dims) == 3 else (None, None)
    for op, layer in zip(ops, order[1:]):
        join = joins[layer.get("id")]

        def run(y, join=join):
            for move in join:
                y = _move(ir, move, y)
            return y

        if not joins_as_a_stack("NDSH", op.spec.num_directions, op.hidden_size, False, run, steps, rows):
            raise FastGRUError(why)
    return GRUStack(ops)


def _move(ir, layer, x):
    """What a layer of ``_MOVES`` does to x (its second input, if any, a Const)."""
    kind = layer.get("type")
    second = ir.producer(layer, 1)
    values = None if second is None else [int(v) for v in ir.constant(second, kind).reshape(-1)]
    if kind == "Transpose":
        return x.transpose(values)
    if kind == "Squeeze":
        axes = [a for a, size in enumerate(x.shape) if size == 1] if values is None else values
        return np.squeeze(x, axis=tuple(a % x.ndim for a in axes))
    if kind == "Unsqueeze":
        return np.expand_dims(x, axis=tuple(a % (x.ndim + len(values)) for a in values))
    if _data(layer).get("special_zero", "false").lower() in ("true", "1"):  # Reshape
        values = [x.shape[k] if size == 0 else size for k, size in enumerate(values)]
    return x.reshape(values)


def _data(layer):
    data = layer.find("data")
    return dict(data.attrib) if data is not None else {}


def _op(ir, layer, weight_dtype=None):
    kind, name = layer.get("type"), layer.get("name")
    where = f"from_openvino: {kind} layer {name!r}"
    weights = []
    for input_name, index in zip(("W", "R", "B"), _WEIGHT_PORTS[kind]):
        source = ir.producer(layer, index)
        if source is None and input_name == "B" and kind == "GRUCell":
            continue  # GRUCell-3's B is optional
        weights.append(ir.constant(source, f"{where}: {input_name}"))
    attrs = _attributes(_data(layer), where)
    with about(where):
        if kind == "AUGRUSequence":
            for key, fixed in _AUGRU_FIXED.items():
                if key in attrs and attrs[key] != fixed:
                    raise NotImplementedError(f"{key}={attrs[key]!r}; AUGRUSequence's {key} is always {fixed!r}")
            return AUGRUSequence(*weights, hidden_size=attrs.get("hidden_size"), weight_dtype=weight_dtype)
        if kind == "GRUCell":
            attrs.pop("direction", None)
            return GRUCell(*weights, **attrs, weight_dtype=weight_dtype)
        return GRUSequence(*weights, **attrs, weight_dtype=weight_dtype)


def _attributes(data, where):
    """The op's keywords from a GRU layer's ``<data>`` (strings, as the IR writes them)."""
    attrs = {}
    for key, text in data.items():
        if key not in _ATTRIBUTES:
            raise NotImplementedError(
                f"{where}: attribute {key}={text!r} is not supported; fastgru knows {', '.join(sorted(_ATTRIBUTES))}"
            )
        try:
            if key == "hidden_size":
                attrs[key] = int(text)
            elif key == "clip":
                attrs[key] = float(text)
            elif key == "linear_before_reset":
                attrs[key] = {"true": True, "false": False, "1": True, "0": False}[text.strip().lower()]
            elif key == "activations":
                attrs[key] = [s.strip() for s in text.split(",") if s.strip()]
            elif key in ("activations_alpha", "activations_beta"):
                attrs[key] = [float(s) for s in text.split(",") if s.strip()]
            else:
                attrs[key] = text.strip()
        except (KeyError, ValueError):
            raise FastGRUError(f"{where}: attribute {key}={text!r} is not a valid value") from None
    return attrs
