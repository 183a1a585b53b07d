"""from_torch: a ``torch.nn.GRU`` (or its state_dict) as a stack of prepared GRUSequence ops.

PyTorch's GRU is GRUSequence-5 with linear_before_reset=True, gate rows in order r, z, n instead
of z, r, h, and two bias vectors: B = [b_iz + b_hz, b_ir + b_hr, b_in, b_hn] (docs/semantics.md, "The gates"). Layer
k > 0 reads the outputs of layer k - 1, both directions concatenated. torch is imported only to
recognise modules; a state_dict of NumPy arrays needs no torch at all.
"""

import re
from collections.abc import Mapping

import numpy as np

from ._import_common import about, fused_bias, to_numpy
from ._ops import GRUCell, GRUSequence
from ._stack import GRUStack
from ._validate import FastGRUError, check_out_array

_KEY = re.compile(r"(weight_ih|weight_hh|bias_ih|bias_hh)_l(\d+)(_reverse)?")
_EXPECTED_KEYS = "weight_ih_l{k}, weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}, with _reverse for the second direction"


class TorchGRU:
    """A ``torch.nn.GRU`` in inference, on fastgru's kernels: ``output, h_n = gru(input, h0)``.

    Made by :func:`fastgru.from_torch`. Shapes and layout are torch's (L seq_len, N batch,
    D = 2 if bidirectional else 1, H hidden_size, num_layers layers):

    - ``input`` (L, N, input_size), or (N, L, input_size) with batch_first, or (L, input_size)
      unbatched;
    - ``h0`` (D*num_layers, N, H), or (D*num_layers, H) unbatched; None (the default) is zeros;
    - ``output`` (L, N, D*H) or (N, L, D*H) with batch_first, or (L, D*H) unbatched: the last
      layer's states, both directions concatenated (forward first);
    - ``h_n`` (D*num_layers, N, H) or (D*num_layers, H): index ``layer*D + direction``.

    ``lengths`` (keyword, optional; N integers, or one for unbatched input) is what a
    ``torch.nn.utils.rnn.pack_padded_sequence`` of the input carries: row b is computed for its first
    ``lengths[b]`` steps only; ``output`` is zero past them and ``h_n`` is the state after the
    last valid step (the reverse direction starts at step ``lengths[b] - 1``), as torch returns
    them after ``pad_packed_sequence``. A length of 0 (which torch does not accept) gives zero
    outputs and a zero h_n (docs/semantics.md, "Sequences").

    The results are NumPy arrays of the weights' dtype; input and h0 must have that dtype (a
    TypeError says otherwise). Dropout between layers is a training feature and is not applied,
    as in ``module.eval()``.

    Attributes
    ----------
    layers : list of fastgru.GRUSequence
        One prepared op per layer, direction "bidirectional" when the GRU is, linear_before_reset=True.
    stack : fastgru.GRUStack
        The layers as one stack, which runs them in one kernel call per call.
    num_layers, hidden_size, input_size : int
    bidirectional, batch_first : bool
    dtype : numpy.dtype
    """

    def __init__(self, layers, *, batch_first, bidirectional):
        self.layers = layers
        self.stack = GRUStack(layers)
        self.batch_first = batch_first
        self.bidirectional = bidirectional

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def hidden_size(self) -> int:
        return self.layers[0].hidden_size

    @property
    def input_size(self) -> int:
        return self.layers[0].input_size

    @property
    def dtype(self) -> np.dtype:
        return self.layers[0].dtype

    def __call__(self, input, h0=None, *, lengths=None):  # noqa: A002 - torch's name
        x = self._input(input, "TorchGRU")
        unbatched = x.ndim == 2
        if unbatched:
            x = x[None]
        n = x.shape[0] if self.batch_first or unbatched else x.shape[1]
        h0 = self._initial_state(h0, n, unbatched)
        if lengths is not None:  # None: every step of every row, as the ops take it
            lengths = to_numpy(lengths)
            if unbatched and lengths.ndim == 0:
                lengths = lengths[None]
        output, h_n = run_layers(self.stack, x, h0, lengths, batch_first=self.batch_first or unbatched)
        if unbatched:
            return output[0], np.ascontiguousarray(h_n[:, 0])
        return output, h_n

    def stream(self, h0=None, *, lengths=None):
        """A :class:`TorchStream`: this GRU (unidirectional) fed a long sequence chunk by chunk, its
        state carried between chunks. ``h0`` as :meth:`__call__` takes it (None: zeros);
        ``lengths`` those of the whole sequence (None: unbounded)."""
        return TorchStream(self, h0, lengths)

    def _input(self, input, where):  # noqa: A002 - torch's name
        """``input`` as a NumPy array of rank 2 (unbatched) or 3, or FastGRUError."""
        x = to_numpy(input)
        if x.ndim not in (2, 3):
            order = "batch, seq_len" if self.batch_first else "seq_len, batch"
            raise FastGRUError(
                f"{where}: input has rank {x.ndim} (shape {x.shape}); expected ({order}, "
                f"input_size={self.input_size}), or (seq_len, input_size) unbatched"
            )
        return x

    def _initial_state(self, h0, n, unbatched):
        """h0 as (layers*D, N, H), or None for zeros."""
        if h0 is None:
            return None
        rows = self.num_layers * (1 + self.bidirectional)
        h0 = to_numpy(h0)
        expected = (rows, self.hidden_size) if unbatched else (rows, n, self.hidden_size)
        if h0.shape != expected:
            what = "(num_layers*num_directions" + ("" if unbatched else ", batch") + ", hidden_size)"
            raise FastGRUError(f"TorchGRU: h0 has shape {h0.shape}; expected {what} = {expected}")
        return h0[:, None] if unbatched else h0

    def __repr__(self):
        return (
            f"TorchGRU(input_size={self.input_size}, hidden_size={self.hidden_size}, "
            f"num_layers={self.num_layers}, bidirectional={self.bidirectional}, "
            f"batch_first={self.batch_first}, dtype={self.dtype.name})"
        )


def from_torch(module_or_state_dict, *, batch_first=None, dtype=None, weight_dtype=None) -> TorchGRU:
    """A ``torch.nn.GRU``, or its state_dict, as a :class:`TorchGRU` running on fastgru's kernels.

    Parameters
    ----------
    module_or_state_dict : torch.nn.GRU, torch.nn.Module or Mapping
        A GRU (any num_layers, bidirectional, batch_first, bias); a module holding exactly one GRU
        among its submodules; or a state_dict: a mapping of the GRU's parameter names
        (``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``, with a
        ``_reverse`` suffix for the second direction) to tensors or arrays, from which num_layers,
        bidirectional, hidden_size, input_size and bias are inferred (no torch needed).
    batch_first : bool, optional
        The input layout. Default: the module's own, False for a state_dict (torch's default).
    dtype : numpy dtype, optional
        The dtype of the ops (float16, float32, float64 or bfloat16). Default: the weights' dtype.
    weight_dtype : {None, 'bfloat16', 'int8'}, optional
        Store W and R compact, read and computed in float32 (see :class:`fastgru.GRUCell`); None
        (the default): exact.

    Returns
    -------
    TorchGRU
        ``output, h_n = gru(input, h0=None, lengths=None)``, as ``torch.nn.GRU.forward`` in eval
        mode; ``gru.layers`` are the prepared :class:`fastgru.GRUSequence` ops, one per layer.

    Raises
    ------
    FastGRUError
        A module without a GRU, or with several; a GRU with proj_size; a state_dict with an unknown
        or missing key, or a weight of the wrong shape (the message names the key).
    TypeError
        Weights of different dtypes, or not floating point.

    Examples
    --------
    >>> import numpy as np, fastgru
    >>> rng = np.random.default_rng(0)
    >>> H, I = 4, 3                      # weights as torch.nn.GRU(3, 4, bidirectional=True) names them
    >>> state = {f"{name}_l0{sfx}": rng.uniform(-0.5, 0.5, shape).astype(np.float32)
    ...          for sfx in ("", "_reverse")
    ...          for name, shape in [("weight_ih", (3 * H, I)), ("weight_hh", (3 * H, H)),
    ...                              ("bias_ih", (3 * H,)), ("bias_hh", (3 * H,))]}
    >>> gru = fastgru.from_torch(state, batch_first=True)
    >>> gru
    TorchGRU(input_size=3, hidden_size=4, num_layers=1, bidirectional=True, batch_first=True, dtype=float32)
    >>> output, h_n = gru(rng.standard_normal((2, 5, I), dtype=np.float32))
    >>> output.shape, h_n.shape
    ((2, 5, 8), (2, 2, 4))
    """
    source, state = _state_dict(module_or_state_dict)
    if isinstance(source, Mapping):
        batch_first = bool(batch_first) if batch_first is not None else False
    else:
        if batch_first is not None and bool(batch_first) != source.batch_first:
            raise FastGRUError(
                f"from_torch: batch_first={batch_first!r} but the module has "
                f"batch_first={source.batch_first}; leave it out to use the module's"
            )
        batch_first = source.batch_first
    layers, bidirectional = gru_layers({key: to_numpy(value) for key, value in state.items()}, dtype, weight_dtype)
    return TorchGRU(layers, batch_first=batch_first, bidirectional=bidirectional)


def gru_layers(arrays, dtype=None, weight_dtype=None):
    """(one prepared GRUSequence per layer, bidirectional) from a GRU's state_dict of NumPy arrays,
    its structure inferred from the keys and every shape checked (errors name the key); ``dtype``:
    the ops' dtype, by default the weights' one; ``weight_dtype``: the ops'."""
    num_layers, bidirectional, bias = _structure(arrays)
    dtype = _common_dtype(arrays, dtype)
    hidden = _hidden_size(arrays["weight_hh_l0"])
    layers = []
    for k in range(num_layers):
        suffixes = ("", "_reverse") if bidirectional else ("",)
        # layer 0 reads the input, of weight_ih_l0's size; layer k > 0 both directions of layer k - 1
        first = arrays["weight_ih_l0"]
        inputs = (1 + bidirectional) * hidden if k > 0 else first.shape[-1] if first.ndim == 2 else None
        W, R, B = [], [], []
        for sfx in suffixes:
            w_ih, w_hh = arrays[f"weight_ih_l{k}{sfx}"], arrays[f"weight_hh_l{k}{sfx}"]
            _check_shape(
                f"weight_ih_l{k}{sfx}",
                w_ih,
                (3 * hidden, inputs),
                ("3*hidden_size", "input_size" if k == 0 else "num_directions*hidden_size"),
            )
            _check_shape(f"weight_hh_l{k}{sfx}", w_hh, (3 * hidden, hidden), ("3*hidden_size", "hidden_size"))
            W.append(_zrh(w_ih))
            R.append(_zrh(w_hh))
            if bias:
                b_ih, b_hh = arrays[f"bias_ih_l{k}{sfx}"], arrays[f"bias_hh_l{k}{sfx}"]
                _check_shape(f"bias_ih_l{k}{sfx}", b_ih, (3 * hidden,), ("3*hidden_size",))
                _check_shape(f"bias_hh_l{k}{sfx}", b_hh, (3 * hidden,), ("3*hidden_size",))
                B.append(fused_bias(_zrh(b_ih), _zrh(b_hh), True, dtype))  # [b_iz+b_hz, b_ir+b_hr, b_in, b_hn]
            else:
                B.append(np.zeros(4 * hidden, dtype=dtype))
        with about(f"from_torch: layer {k}"):
            layers.append(
                GRUSequence(
                    np.stack(W).astype(dtype),
                    np.stack(R).astype(dtype),
                    np.stack(B),
                    direction="bidirectional" if bidirectional else "forward",
                    linear_before_reset=True,
                    weight_dtype=weight_dtype,
                )
            )
    return layers, bidirectional


def gru_cell(weight_ih, weight_hh, bias_ih=None, bias_hh=None, dtype=None, weight_dtype=None) -> GRUCell:
    """A ``torch.nn.GRUCell``'s parameters (NumPy arrays; no biases for bias=False) as a prepared
    GRUCell with linear_before_reset, gate rows z, r, h; ``dtype``: the op's, by default weight_ih's;
    ``weight_dtype``: the op's."""
    dtype = np.dtype(weight_ih.dtype if dtype is None else dtype)
    hidden = weight_hh.shape[-1]
    if bias_ih is None:
        B = np.zeros(4 * hidden, dtype=dtype)
    else:
        B = fused_bias(_zrh(bias_ih), _zrh(bias_hh), True, dtype)
    W, R = _zrh(weight_ih).astype(dtype), _zrh(weight_hh).astype(dtype)
    return GRUCell(W, R, B, linear_before_reset=True, weight_dtype=weight_dtype)


def run_layers(stack, x, h0, lengths, batch_first):
    """Run a stack of GRU layers (a :class:`fastgru.GRUStack`) as torch.nn.GRU does; every layout
    conversion between torch's tensors and the stack's arrays is here, and only here.

    ``x`` (N, S, I) with ``batch_first``, else (S, N, I); ``h0`` (layers*D, N, H) or None for
    zeros; ``lengths`` (N,) integers or None. Returns ``output`` (N, S, D*H) with ``batch_first``,
    else (S, N, D*H), and ``h_n`` (layers*D, N, H): new C-contiguous arrays of the stack's dtype.

    The stack takes X as (N, S, I) and the states as (N, layers*D*H), and returns Y (N, D, S, H):
    copies are left for a time-major x (the stack copies it to (N, S, I)), h0 and h_n when N > 1
    (torch's states are layer-major), the Y of a bidirectional last layer, to (N, S, 2H), and a
    time-major output. A forward GRU at batch 1 in batch_first layout copies nothing.
    """
    if not batch_first:
        x = x.transpose(1, 0, 2)
    n, s = x.shape[0], x.shape[1]
    first = stack.layers[0]
    d, hidden = first.spec.num_directions, first.hidden_size
    rows = len(stack.layers) * d
    y, ho = stack(x, _stack_state(stack, h0, n), lengths)
    output = y.transpose(0, 2, 1, 3).reshape(n, s, d * hidden)  # (N, S, D*H): a view when D = 1
    h_n = np.ascontiguousarray(ho.reshape(n, rows, hidden).transpose(1, 0, 2))
    output = output if batch_first else output.transpose(1, 0, 2)
    return np.ascontiguousarray(output), h_n


def _stack_state(stack, h0, n):
    """torch's states h0 (layers*D, N, H), or None for zeros, as the stack's (N, state_size)."""
    if h0 is None:
        return np.zeros((n, stack.state_size), dtype=stack.dtype)
    return np.ascontiguousarray(h0.transpose(1, 0, 2)).reshape(n, stack.state_size)


class TorchStream:
    """A unidirectional :class:`TorchGRU` fed one chunk of steps at a time, its state carried:
    ``stream = gru.stream(h0)``, then ``output = stream(input)`` for each chunk, in the GRU's layout
    (batch first or not; unbatched chunks when the first one is); ``stream.h_n`` is the state after
    the chunks fed so far, as torch's. The chunks' outputs, concatenated along the time axis, and
    the last ``h_n`` are the bits one call on the whole sequence gives (``lengths`` those of the
    whole sequence: a row whose length has run out keeps its state).

    ``stream(input, out=output)`` writes the chunk's output into ``output`` (its shape, the GRU's
    dtype, C-contiguous and writeable) and returns it. Batch first, or one row, with input a
    C-contiguous array of the GRU's dtype, a chunk allocates no array: the frame-by-frame loop of
    a real-time model."""

    def __init__(self, gru, h0, lengths):
        if gru.bidirectional:
            raise FastGRUError(
                "TorchGRU.stream: the GRU is bidirectional; only a unidirectional GRU can be streamed "
                "(a reverse pass starts at the last step): call it on the whole sequence"
            )
        self._gru, self._h0, self._lengths = gru, h0, lengths
        self._stream, self._unbatched = None, None  # made at the first chunk, which gives N

    @property
    def steps(self) -> int:
        """The steps fed so far."""
        return 0 if self._stream is None else self._stream.steps

    @property
    def h_n(self) -> np.ndarray:
        """The state after the chunks fed so far, (num_layers, N, H) or (num_layers, H) unbatched."""
        if self._stream is None:
            if self._h0 is None:
                raise FastGRUError("TorchGRU stream: no chunk fed yet, and no h0: the batch size is not known")
            return np.array(to_numpy(self._h0))
        gru, ho = self._gru, self._stream.Ho
        h_n = np.ascontiguousarray(ho.reshape(ho.shape[0], gru.num_layers, gru.hidden_size).transpose(1, 0, 2))
        return np.ascontiguousarray(h_n[:, 0]) if self._unbatched else h_n

    def __call__(self, input, *, out=None):  # noqa: A002 - torch's name
        gru = self._gru
        x = gru._input(input, "TorchGRU stream")
        if self._stream is None:
            self._start(x)
        elif (x.ndim == 2) != self._unbatched:
            raise FastGRUError(
                f"TorchGRU stream: input has rank {x.ndim}; expected {2 if self._unbatched else 3}, as the "
                "stream's first chunk"
            )
        batch_first = gru.batch_first or self._unbatched
        x = x[None] if self._unbatched else x
        n, s = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
        if out is not None:
            shape = (
                (s, gru.hidden_size)
                if self._unbatched
                else (n, s, gru.hidden_size)
                if batch_first
                else (s, n, gru.hidden_size)
            )
            check_out_array("TorchGRU stream", out, shape, gru.dtype)
        if not batch_first:  # (S, N, I): a view of one row as (1, S, I), else the stack copies it
            x = x.reshape(1, s, -1) if n == 1 else x.transpose(1, 0, 2)
        shape = (n, 1, s, gru.hidden_size)
        if out is not None and (batch_first or n == 1):  # the same order: the kernels write out
            self._stream(x, out=out.reshape(shape))
            return out
        output = self._stream(x).reshape(n, s, gru.hidden_size)
        output = output if batch_first else output.transpose(1, 0, 2)
        if out is None:
            return output[0] if self._unbatched else np.ascontiguousarray(output)
        np.copyto(out, output)
        return out

    def _start(self, x):
        """The stack's stream, from h0 (or zeros) of the first chunk's batch."""
        gru, unbatched = self._gru, x.ndim == 2
        n = 1 if unbatched else x.shape[0] if gru.batch_first else x.shape[1]
        lengths = None if self._lengths is None else to_numpy(self._lengths)
        if unbatched and lengths is not None and lengths.ndim == 0:
            lengths = lengths[None]
        state = _stack_state(gru.stack, gru._initial_state(self._h0, n, unbatched), n)
        self._stream, self._unbatched = gru.stack.stream(state, lengths), unbatched


def _state_dict(obj):
    """(the GRU module or the mapping, its state_dict)."""
    if isinstance(obj, Mapping):
        return obj, obj
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not isinstance(obj, torch.nn.Module):
        raise TypeError(
            f"from_torch: got {type(obj).__name__}; expected a torch.nn.GRU, a module holding "
            "one, or a GRU's state_dict (a mapping of parameter names to tensors or arrays)"
        )
    if not _is_gru(torch, obj):
        found = [name for name, m in obj.named_modules() if _is_gru(torch, m)]
        if not found:
            raise FastGRUError(f"from_torch: {type(obj).__name__} is not a torch.nn.GRU and holds none")
        if len(found) > 1:
            raise FastGRUError(
                f"from_torch: {type(obj).__name__} holds {len(found)} torch.nn.GRU modules "
                f"({', '.join(found)}); pass the one to convert, e.g. model.{found[0]}"
            )
        obj = obj.get_submodule(found[0])
    if getattr(obj, "proj_size", 0):
        raise FastGRUError(f"from_torch: proj_size={obj.proj_size} is not supported (a GRU has no projection)")
    return obj, obj.state_dict()


def _is_gru(torch, module):
    """A torch.nn.GRU, or fastgru.torch.GRU (a torch.nn.RNNBase in mode "GRU", as torch.nn.GRU is)."""
    return isinstance(module, torch.nn.GRU) or (isinstance(module, torch.nn.RNNBase) and module.mode == "GRU")


def _structure(arrays):
    """(num_layers, bidirectional, bias) from the keys; every key known, none missing."""
    found = {}
    for key in arrays:
        match = _KEY.fullmatch(key) if isinstance(key, str) else None
        if match is None:
            what, hint = "", ""
            if isinstance(key, str) and "weight_hr" in key:
                what = " (an LSTM's projection, proj_size: torch.nn.GRU has none)"
            elif isinstance(key, str) and _KEY.search(key):
                prefix = key[: _KEY.search(key).start()]
                hint = (
                    f". For a GRU inside a larger model, keep its entries without the prefix: "
                    f"{{k.removeprefix({prefix!r}): v for k, v in state.items() if k.startswith({prefix!r})}}"
                )
            raise FastGRUError(
                f"from_torch: state_dict key {key!r} is not a GRU parameter{what}; expected {_EXPECTED_KEYS}{hint}"
            )
        found[key] = (match[1], int(match[2]), bool(match[3]))
    if not found:
        raise FastGRUError(f"from_torch: the state_dict is empty; expected {_EXPECTED_KEYS}")
    num_layers = max(k for _, k, _ in found.values()) + 1
    bidirectional = any(rev for _, _, rev in found.values())
    bias = any(name.startswith("bias") for name, _, _ in found.values())
    names = ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if bias else ())
    for k in range(num_layers):
        for sfx in ("", "_reverse") if bidirectional else ("",):
            for name in names:
                if f"{name}_l{k}{sfx}" not in arrays:
                    why = (
                        f"num_layers={num_layers} from {max(found, key=lambda key: found[key][1])!r}, "
                        f"bidirectional={bidirectional}, bias={bias}"
                    )
                    raise FastGRUError(f"from_torch: state_dict has no {name}_l{k}{sfx} ({why})")
    return num_layers, bidirectional, bias


def _common_dtype(arrays, dtype):
    """The ops' dtype: ``dtype`` if given, else the one floating dtype of all the weights."""
    if dtype is not None:
        return np.dtype(dtype)
    first = None
    for key, array in arrays.items():
        if first is None:
            first = (key, array.dtype)
        elif array.dtype != first[1]:
            raise TypeError(
                f"from_torch: {key} is {array.dtype.name} but {first[0]} is {first[1].name}; "
                "the weights must share one dtype (or pass dtype=)"
            )
    return first[1]


def _hidden_size(w_hh):
    """hidden_size from weight_hh_l0, (3*hidden_size, hidden_size)."""
    if w_hh.ndim != 2 or w_hh.shape[1] == 0 or w_hh.shape[0] != 3 * w_hh.shape[1]:
        hint = (
            " (an LSTM's weights have 4*hidden_size rows)"
            if w_hh.ndim == 2 and w_hh.shape[0] == 4 * w_hh.shape[1]
            else ""
        )
        raise FastGRUError(
            f"from_torch: weight_hh_l0 has shape {w_hh.shape}; expected (3*hidden_size, hidden_size) "
            f"with hidden_size > 0{hint}"
        )
    return w_hh.shape[1]


def _check_shape(key, array, expected, symbols):
    """``array.shape == expected`` (None: any size), else an error naming the key and the sizes."""
    if array.ndim == len(expected) and all(e is None or a == e for a, e in zip(array.shape, expected)):
        return
    text = ", ".join(s if e is None else f"{s}={e}" for s, e in zip(symbols, expected))
    lstm = array.ndim and array.shape[0] == 4 * expected[0] // 3
    hint = " (an LSTM's weights have 4*hidden_size rows)" if lstm else ""
    comma = "," if len(expected) == 1 else ""
    raise FastGRUError(
        f"from_torch: {key} has shape {array.shape}; expected ({text}{comma}), hidden_size from weight_hh_l0{hint}"
    )


def _zrh(rzn):
    """Gate rows r, z, n (torch) as z, r, h (OpenVINO)."""
    r, z, n = np.split(rzn, 3)
    return np.concatenate([z, r, n])
