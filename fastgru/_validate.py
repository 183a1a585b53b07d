"""Every check of the public layer: attributes, dtypes, shapes and values (docs/semantics.md).

Each check is a small function that raises with a message naming the op, the input or attribute
by its specification name, what was expected and what came. The ``validate_*`` functions return a
frozen :class:`Spec` that the dispatch layer trusts.
"""

import math
import numbers
import operator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ._codes import ACTIVATIONS as CODES
from ._codes import CLOSED, HELD
from ._codes import NUM_DIRECTIONS as DIRECTIONS

_T1_DTYPES = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))


class FastGRUError(ValueError):
    """A shape, rank, dimension, attribute value or sequence length that the op cannot take."""


class Attributes(NamedTuple):
    """An op's attributes as the caller gives them, with the specification's defaults: the one place
    where the defaults are written (the public signatures take them from ``DEFAULT``)."""

    hidden_size: object = None
    direction: object = "forward"
    activations: object = ("sigmoid", "tanh")
    activations_alpha: object = ()
    activations_beta: object = ()
    clip: object = math.inf
    linear_before_reset: object = False


DEFAULT = Attributes()


@dataclass(frozen=True)
class Spec:
    """What an op computes, whatever the batch: attributes, sizes (docs/semantics.md, "Inputs and
    their shapes"), T1 and layout."""

    op: str
    input_size: int
    hidden_size: int
    direction: str
    f_code: int
    g_code: int
    clip: float  # 0.0 means no clipping
    linear_before_reset: bool
    dtype: np.dtype  # T1, in native byte order
    layout: str  # a key of LAYOUTS
    x_rank: int  # X's rank: 2 for the cell, else 3
    state_shape: tuple  # initial_hidden_state's shape without the batch axis

    @property
    def num_directions(self) -> int:
        return DIRECTIONS[self.direction]


# ---------------------------------------------------------------------------------------- attributes


def _check_hidden_size(op, hidden_size):
    if hidden_size is None:
        return None
    if isinstance(hidden_size, bool) or not isinstance(hidden_size, numbers.Integral) or hidden_size <= 0:
        raise FastGRUError(
            f"{op}: hidden_size is {hidden_size!r}; expected a positive integer (or None to take it from R)"
        )
    return int(hidden_size)


def _check_direction(op, direction):
    name = direction.lower() if isinstance(direction, str) else None
    if name not in DIRECTIONS:
        raise FastGRUError(f"{op}: direction is {direction!r}; expected 'forward', 'reverse' or 'bidirectional'")
    return name


def _check_activations(op, activations):
    if type(activations) is tuple and activations == DEFAULT.activations:  # the common case, without the loop
        return CODES["sigmoid"], CODES["tanh"]
    if isinstance(activations, str) or not _is_sequence(activations) or len(activations) != 2:
        raise FastGRUError(
            f"{op}: activations is {activations!r}; expected two names, f for the z and r gates and g for "
            "the h gate, from 'relu', 'sigmoid', 'tanh', e.g. ('sigmoid', 'tanh')"
        )
    codes = []
    for i, name in enumerate(activations):
        key = name.lower() if isinstance(name, str) else None
        if key not in CODES:
            raise FastGRUError(f"{op}: activations[{i}] is {name!r}; expected one of 'relu', 'sigmoid', 'tanh'")
        codes.append(CODES[key])
    return codes


def _check_alpha_beta(op, name, values):
    # Accepted for IR compatibility; relu, sigmoid and tanh take no parameters.
    if type(values) is tuple and not values:
        return
    if isinstance(values, str) or not _is_sequence(values) or len(values) > 2:
        raise FastGRUError(f"{op}: {name} is {values!r}; expected a list of at most two floats")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise FastGRUError(f"{op}: {name}[{i}] is {v!r}; expected a float")


def _check_clip(op, clip):
    if type(clip) is float and clip == math.inf:  # the default, without the checks below
        return 0.0
    try:
        value = float(clip) if isinstance(clip, numbers.Real) and not isinstance(clip, bool) else math.nan
    except OverflowError:  # an integer beyond float's range: beyond every value, so no clipping if positive
        value = math.inf if clip > 0 else -math.inf
    if math.isnan(value) or value < 0:
        raise FastGRUError(f"{op}: clip is {clip!r}; expected a number >= 0 (0 or math.inf: no clipping)")
    return 0.0 if math.isinf(value) else value


def _check_linear_before_reset(op, linear_before_reset):
    if linear_before_reset is False or linear_before_reset is True:
        return linear_before_reset
    if isinstance(linear_before_reset, (bool, np.bool_)):
        return bool(linear_before_reset)
    if isinstance(linear_before_reset, numbers.Integral) and linear_before_reset in (0, 1):
        return bool(linear_before_reset)
    raise FastGRUError(f"{op}: linear_before_reset is {linear_before_reset!r}; expected True or False")


def _is_sequence(value):
    try:
        len(value)
    except TypeError:
        return False
    return True


# -------------------------------------------------------------------------------------------- dtypes


def _is_t1(dtype):
    # bfloat16 is ml_dtypes' (optional): recognised by name, so fastgru never imports ml_dtypes.
    return dtype in _T1_DTYPES or dtype.name == "bfloat16"


def _check_t1(op, arrays, first_name=None, first=None):
    """All T1 inputs share one floating dtype (docs/semantics.md, "Types"); returns it in native byte order.

    ``first_name``/``first``: the dtype the inputs must match, when it is known already (the
    weights of a prepared op).
    """
    for name, array in arrays.items():
        if array.dtype == object and array.ndim == 0 and array.item() is None:
            raise TypeError(f"{op}: {name} is None; expected an array of float16, float32, float64 or bfloat16")
        dtype = array.dtype if array.dtype.isnative else array.dtype.newbyteorder("=")
        if not _is_t1(dtype):
            raise TypeError(
                f"{op}: {name} is {array.dtype.name}; expected float16, float32, float64 or bfloat16. "
                f"Convert with {name}.astype(np.float32)."
            )
        if first is None:
            first_name, first = name, dtype
        elif dtype != first:
            raise TypeError(
                f"{op}: {name} is {dtype.name} but {first_name} is {first.name}; all of X, initial_hidden_state, "
                "W, R, B (and A) must share one floating dtype (T1)"
            )
    return first


def _check_t2(op, sequence_lengths):
    kind = sequence_lengths.dtype.kind
    if kind not in "iu":
        raise TypeError(
            f"{op}: sequence_lengths is {sequence_lengths.dtype.name}; expected an integer dtype (T2), "
            "e.g. np.int32 or np.int64"
        )


# -------------------------------------------------------------------------------------------- shapes

# The shape of every input per layout, in the specification's symbols (docs/semantics.md, "Inputs
# and their shapes"). "G" is 3, or 4 for B when linear_before_reset; "1" is a literal 1.
LAYOUTS = {
    "cell": {
        "X": ("batch_size", "input_size"),
        "initial_hidden_state": ("batch_size", "hidden_size"),
        "W": ("3*hidden_size", "input_size"),
        "R": ("3*hidden_size", "hidden_size"),
        "B": ("G*hidden_size",),
    },
    "sequence": {
        "X": ("batch_size", "seq_length", "input_size"),
        "initial_hidden_state": ("batch_size", "num_directions", "hidden_size"),
        "sequence_lengths": ("batch_size",),
        "W": ("num_directions", "3*hidden_size", "input_size"),
        "R": ("num_directions", "3*hidden_size", "hidden_size"),
        "B": ("num_directions", "G*hidden_size"),
        "A": ("batch_size", "seq_length", "1"),
    },
    "augru2d": {
        "X": ("batch_size", "seq_length", "input_size"),
        "initial_hidden_state": ("batch_size", "hidden_size"),
        "sequence_lengths": ("batch_size",),
        "W": ("3*hidden_size", "input_size"),
        "R": ("3*hidden_size", "hidden_size"),
        "B": ("3*hidden_size",),
        "A": ("batch_size", "seq_length", "1"),
    },
}


def _factors(symbol):
    """A symbol of LAYOUTS as the two keys of ``dims`` whose product it is ("1" is dims["1"] = 1)."""
    factor, _, name = symbol.rpartition("*")
    return factor or "1", name


#: LAYOUTS parsed once: every call checks its shapes with two lookups per dimension.
_FACTORS = {
    layout: {name: tuple(_factors(s) for s in symbols) for name, symbols in inputs.items()}
    for layout, inputs in LAYOUTS.items()
}


def _check_ranks(op, layout, arrays):
    for name, array in arrays.items():
        symbols = layout[name]
        if array.ndim != len(symbols):
            raise FastGRUError(
                f"{op}: {name} has rank {array.ndim} (shape {array.shape}); "
                f"expected rank {len(symbols)}: ({', '.join(symbols)}{',' if len(symbols) == 1 else ''})"
            )


def _check_shapes(op, layout, arrays, dims, sources, linear_before_reset):
    """Check every dimension of ``arrays`` against ``dims``; ``sources`` says where each size came from."""
    factors = _FACTORS[layout]
    for name, array in arrays.items():
        expected = tuple([dims[a] * dims[b] for a, b in factors[name]])
        if array.shape != expected:
            symbols = LAYOUTS[layout][name]
            text = ", ".join(
                symbol if symbol == "1" else f"{symbol.replace('G*', str(dims['G']) + '*')}={size}"
                for symbol, size in zip(symbols, expected)
            )
            note = f" (linear_before_reset={linear_before_reset})" if "G*hidden_size" in symbols else ""
            where = [
                f"{size} from {sources[size]}"
                for size in dict.fromkeys(s.rpartition("*")[2] for s in symbols)
                if size in sources and not sources[size].startswith(name + ".")
            ]
            where = "; " + ", ".join(where) if where else ""
            raise FastGRUError(f"{op}: {name} has shape {array.shape}; expected ({text}){note}{where}")


def _dims(arrays, hidden_size, direction, linear_before_reset, known=None):
    """The sizes of a call, and where each comes from: ``known`` ones (a prepared op's weights),
    then X for batch, steps and inputs, W for inputs without X, the attribute or R for hidden."""
    dims = {"num_directions": DIRECTIONS[direction], "G": 4 if linear_before_reset else 3, "3": 3, "1": 1}
    sources = {"num_directions": f"direction={direction!r}"}
    for name, (size, source) in (known or {}).items():
        dims[name], sources[name] = size, source
    X = arrays.get("X")
    if X is not None:
        dims["batch_size"], sources["batch_size"] = X.shape[0], "X.shape[0]"
        dims["seq_length"], sources["seq_length"] = (X.shape[1], "X.shape[1]") if X.ndim == 3 else (1, "")
    elif "initial_hidden_state" in arrays:  # a stream's start: no X yet, and no seq_length
        dims["batch_size"] = arrays["initial_hidden_state"].shape[0]
        sources["batch_size"] = "initial_hidden_state.shape[0]"
    if "input_size" not in dims:
        dims["input_size"], sources["input_size"] = (
            (X.shape[-1], "X.shape[-1]") if X is not None else (arrays["W"].shape[-1], "W.shape[-1]")
        )
    if "hidden_size" not in dims and hidden_size is None:
        dims["hidden_size"], sources["hidden_size"] = arrays["R"].shape[-1], "R.shape[-1]"
    elif "hidden_size" not in dims:
        dims["hidden_size"], sources["hidden_size"] = hidden_size, "the hidden_size attribute"
    return dims, sources


def check_lengths(op, sequence_lengths, seq_length, first_row=0):
    """0 <= sequence_lengths <= seq_length (docs/semantics.md, "Sequences"); only 0 <= sequence_lengths when
    seq_length is None (a stream's lengths, whose chunks are yet to come). The message numbers the
    rows from ``first_row`` (a chunk's place in the whole batch)."""
    limit = np.iinfo(np.int64).max if seq_length is None else seq_length
    if sequence_lengths.size <= 16:  # a list is faster than two NumPy reductions at serving sizes
        values = sequence_lengths.tolist()
        if not values or (min(values) >= 0 and max(values) <= limit):
            return
    elif sequence_lengths.min() >= 0 and sequence_lengths.max() <= limit:
        return
    bad = (sequence_lengths < 0) | (sequence_lengths > limit)
    i = int(np.argmax(bad))
    expected = (
        "0 <= sequence_lengths"
        if seq_length is None
        else (f"0 <= sequence_lengths <= seq_length={seq_length} (X.shape[1])")
    )
    raise FastGRUError(f"{op}: sequence_lengths[{first_row + i}] is {sequence_lengths[i]}; expected {expected}")


# ----------------------------------------------------------------------------------------------- ops


def _attributes(op, attributes):
    hidden_size, direction, activations, activations_alpha, activations_beta, clip, linear_before_reset = attributes
    hidden_size = _check_hidden_size(op, hidden_size)
    direction = _check_direction(op, direction)
    f_code, g_code = _check_activations(op, activations)
    _check_alpha_beta(op, "activations_alpha", activations_alpha)
    _check_alpha_beta(op, "activations_beta", activations_beta)
    clip = _check_clip(op, clip)
    linear_before_reset = _check_linear_before_reset(op, linear_before_reset)
    return hidden_size, direction, f_code, g_code, clip, linear_before_reset


def _check(op, layout, arrays, hidden_size, direction, linear_before_reset, known=None, dtype=None):
    """dtypes, then ranks, then shapes, then sequence_lengths values; returns (dims, T1)."""
    floats = {name: a for name, a in arrays.items() if name != "sequence_lengths"}
    dtype = _check_t1(op, floats, "the op's W" if dtype is not None else None, dtype)
    if "sequence_lengths" in arrays:
        _check_t2(op, arrays["sequence_lengths"])
    _check_ranks(op, LAYOUTS[layout], arrays)
    if known is None and hidden_size is None and arrays["R"].shape[-1] == 0:
        raise FastGRUError(f"{op}: R has shape {arrays['R'].shape}; hidden_size (its last dimension) must be positive")
    dims, sources = _dims(arrays, hidden_size, direction, linear_before_reset, known)
    _check_shapes(op, layout, arrays, dims, sources, linear_before_reset)
    if "sequence_lengths" in arrays:
        check_lengths(op, arrays["sequence_lengths"], dims.get("seq_length"))
    return dims, dtype


def validate(op, layout, arrays, attributes=DEFAULT):
    """Check a function call, or the weights of a prepared op: ``arrays`` maps specification names
    to NumPy arrays, ``attributes`` is an Attributes; return the Spec.

    ``layout`` names an entry of LAYOUTS. Attributes are checked first, then dtypes, shapes and
    finally the values of sequence_lengths. Sizes come from X (batch, steps, inputs; from W without
    X) and R or the hidden_size attribute (hidden).

    Whether a call is valid depends only on its attributes, shapes and dtypes, and on the values
    of sequence_lengths: a call like one seen before (``_SPECS``) checks only those values.
    """
    key = _spec_key(op, layout, arrays, attributes)
    spec = _SPECS.get(key)
    if spec is not None:
        if "sequence_lengths" in arrays:
            check_lengths(op, arrays["sequence_lengths"], arrays["X"].shape[1] if "X" in arrays else None)
        return spec
    hidden_size, direction, f_code, g_code, clip, lbr = _attributes(op, attributes)
    dims, dtype = _check(op, layout, arrays, hidden_size, direction, lbr)
    h, d = dims["hidden_size"], DIRECTIONS[direction]
    state_shape = (h,) if layout in ("cell", "augru2d") else (d, h)
    spec = Spec(
        op,
        dims["input_size"],
        h,
        direction,
        f_code,
        g_code,
        clip,
        lbr,
        dtype,
        layout,
        len(LAYOUTS[layout]["X"]),
        state_shape,
    )
    if key is not None:
        if len(_SPECS) >= _SPECS_KEPT:
            _SPECS.clear()
        _SPECS[key] = spec
    return spec


#: Specs of valid calls by _spec_key, at most _SPECS_KEPT of them (then the memo starts afresh).
_SPECS = {}
_SPECS_KEPT = 256


def _spec_key(op, layout, arrays, attributes):
    """What a call's validity depends on, apart from the values of sequence_lengths: op, layout,
    each input's name, shape and dtype (byte order included), and the attributes
    (``attributes_key``). None when an attribute cannot be hashed."""
    values = attributes_key(attributes)
    if values is None:
        return None
    return op, layout, tuple([(name, a.shape, a.dtype) for name, a in arrays.items()]), values


def attributes_key(attributes):
    """Attributes (an Attributes, or its first fields) as a key that only attributes accepted alike
    share: each with its type, a list or tuple as the tuple of its items with theirs (so that
    neither 1.0 nor [1.0] is taken for a valid True or [True]), a list as it is now; () for the
    defaults themselves. None when an attribute cannot be hashed (an array)."""
    if all(map(operator.is_, attributes, DEFAULT)):
        return ()
    typed = []
    for value in attributes:
        kind = type(value)
        if kind is tuple or kind is list:
            value = tuple(value)
            kind = kind, tuple(map(type, value))
        typed += value, kind
    typed = tuple(typed)
    try:
        hash(typed)
    except TypeError:
        return None
    return typed


def record(*arrays):
    """What ``fits`` compares a later call's arrays with, of a call whose arrays passed the checks:
    each one's shape, dtype and whether it is C-contiguous, aligned and writeable (None for None)."""
    return tuple(None if a is None else (a.shape, a.dtype, a.flags.carray) for a in arrays)


def fits(seen, *arrays):
    """Whether a call's ``arrays`` are as the call ``seen`` records (``record``): None where it had
    None, else ndarrays of its shapes and dtypes (dtype identity suffices: NumPy keeps one instance
    per native dtype), C-contiguous where it was (the outputs the kernels write in place must be).
    Plain comparisons, for the calls of a shape seen before: prepared ops, streams, state pools,
    stacks. False means: run the full checks, which accept the call or say what is wrong."""
    for want, a in zip(seen, arrays):
        if want is None:
            if a is not None:
                return False
        elif type(a) is not np.ndarray or a.shape != want[0] or a.dtype is not want[1] or want[2] > a.flags.carray:
            return False
    return True


def validate_call(spec, arrays):
    """Check the per-call inputs of a prepared op against its Spec (sizes and T1 of its weights)."""
    known = {"input_size": (spec.input_size, "the op's W"), "hidden_size": (spec.hidden_size, "the op's R")}
    _check(spec.op, spec.layout, arrays, spec.hidden_size, spec.direction, spec.linear_before_reset, known, spec.dtype)


def augru_layout(op, name, array):
    """The AUGRU layout picked by the rank of ``array`` (docs/semantics.md, "Inputs and their
    shapes"): initial_hidden_state for the function, W for a prepared op (its state must then
    follow)."""
    if array.ndim == 2:
        return "augru2d"
    if array.ndim == 3:
        return "sequence"
    dims = LAYOUTS["augru2d"][name]
    raise FastGRUError(
        f"{op}: {name} has rank {array.ndim} (shape {array.shape}); expected rank 2 ({', '.join(dims)}) or, "
        f"in OpenVINO's layout, rank 3 (1, {', '.join(dims)})".replace("(1, batch_size", "(batch_size, 1")
    )


def _out_dtype_error(what, dtype, expected):
    """The TypeError of an output array whose dtype is not ``expected`` (native byte order); one of
    the right type in the other byte order is named as such, since the kernels write it in place."""
    if dtype.newbyteorder("=") == expected:
        return TypeError(
            f"{what} is {dtype.name} in non-native byte order ({dtype.str!r}); expected {expected.name} in the "
            f"machine's byte order ({expected.str!r}), the dtype of the inputs: out= arrays are written in place "
            "and cannot be byte-swapped. Allocate them with np.empty(shape, dtype)."
        )
    return TypeError(f"{what} is {dtype.name}; expected {expected.name}, the dtype of the inputs")


def check_out(spec, out, shapes):
    """Check preallocated outputs: a tuple (Y, Ho) for the sequences, one array for the cell."""
    outs = (out,) if spec.layout == "cell" else out
    if type(outs) is tuple and len(outs) == len(shapes):  # the common case, in plain comparisons
        for array, shape in zip(outs, shapes):
            if (
                type(array) is not np.ndarray
                or array.shape != shape
                or array.dtype is not spec.dtype
                or (not array.flags.carray)
            ):
                break
        else:
            return outs
    names = ("Ho",) if spec.layout == "cell" else ("Y", "Ho")
    if not isinstance(outs, (tuple, list)) or len(outs) != len(names):
        raise FastGRUError(f"{spec.op}: out is {type(out).__name__}; expected a tuple (Y, Ho) of ndarrays")
    for name, array, shape in zip(names, outs, shapes):
        if not isinstance(array, np.ndarray):
            raise FastGRUError(f"{spec.op}: out {name} is {type(array).__name__}; expected an ndarray")
        if array.shape != shape:
            raise FastGRUError(f"{spec.op}: out {name} has shape {array.shape}; expected {shape}")
        if array.dtype != spec.dtype:  # spec.dtype is native: a swapped byte order differs too
            raise _out_dtype_error(f"{spec.op}: out {name}", array.dtype, spec.dtype)
        flags = array.flags
        if not (flags.c_contiguous and flags.writeable):
            raise FastGRUError(f"{spec.op}: out {name} must be a writeable C-contiguous array")
    return tuple(outs)


# -------------------------------------------------------------------------------------------- stacks


def check_stack_layers(layers, sequence_class):
    """The layers of a GRUStack: prepared GRUSequence ops of one dtype, each taking the previous
    one's Y (num_directions·hidden_size inputs)."""
    if not layers:
        raise FastGRUError("GRUStack: layers is empty; expected a list of prepared fastgru.GRUSequence ops")
    for k, op in enumerate(layers):
        if type(op) is not sequence_class:
            raise TypeError(
                f"GRUStack: layer {k} is {type(op).__name__}; expected a prepared fastgru.GRUSequence, "
                "e.g. fastgru.GRUSequence(W, R, B)"
            )
        spec = op.spec
        if spec.dtype != layers[0].spec.dtype:
            raise TypeError(
                f"GRUStack: layer {k}'s dtype is {spec.dtype.name}; expected {layers[0].spec.dtype.name}, "
                "layer 0's: the layers of a stack share one dtype"
            )
        if k > 0:
            before = layers[k - 1].spec
            width = before.num_directions * before.hidden_size
            if spec.input_size != width:
                raise FastGRUError(
                    f"GRUStack: layer {k}'s input_size is {spec.input_size}; expected {width}, layer {k - 1}'s "
                    f"num_directions*hidden_size ({before.num_directions}*{before.hidden_size}): its Y is "
                    f"layer {k}'s X"
                )


def check_stack_state(where, name, state, shape, dtype):
    """A stack's states: ``shape`` (N, state_size) and the stack's dtype (T1)."""
    _check_t1(where, {name: state}, "the stack's layers", dtype)
    if state.shape != shape:
        raise FastGRUError(
            f"{where}: {name} has shape {state.shape}; expected {shape}, (batch_size, state_size): each row "
            "the layers' states one after another"
        )


# --------------------------------------------------------------------------------------------- pools
# The checks of fastgru.StatePool (``_pool.py``). ``where`` names the op and the method, e.g.
# "GRUCell pool.step". A failed check raises before any state changes.


def check_pool_op(op, classes):
    """A prepared op of ``classes`` whose streams can be stepped: forward only. Returns its Spec."""
    if not isinstance(op, classes):
        raise TypeError(
            f"StatePool: op is {type(op).__name__}; expected a prepared fastgru.GRUCell, GRUSequence, "
            "AUGRUSequence or GRUStack, e.g. fastgru.GRUCell(W, R, B)"
        )
    for k, layer in enumerate(getattr(op, "layers", ())):  # a stack's layers
        if layer.spec.direction != "forward":
            raise FastGRUError(
                f"StatePool: the stack's layer {k} has direction {layer.spec.direction!r}; a pool runs "
                "forward streams only (a reverse pass starts at the last step): call the stack on whole sequences"
            )
    spec = op.spec
    if spec.direction != "forward":
        raise FastGRUError(
            f"StatePool: the {spec.op}'s direction is {spec.direction!r}; a pool runs forward "
            "streams only (a reverse pass starts at the last step): call the op on whole sequences"
        )
    return spec


def check_capacity(capacity):
    """A positive integer (bool refused); returns it as an int."""
    if isinstance(capacity, (bool, np.bool_)) or not isinstance(capacity, numbers.Integral) or capacity <= 0:
        raise FastGRUError(
            f"StatePool: capacity is {capacity!r}; expected a positive integer, the most streams open at once"
        )
    return int(capacity)


def check_room(where, n_free, capacity):
    """A stream can be opened: fewer than ``capacity`` are open."""
    if n_free == 0:
        raise FastGRUError(
            f"{where}: all {capacity} streams are open (capacity={capacity}); close one first, or "
            "make the pool with a larger capacity"
        )


def check_stream_id(where, stream_id, capacity):
    """One stream id: an integer (not bool) in [0, capacity); returns it as an int."""
    if isinstance(stream_id, (bool, np.bool_)) or not isinstance(stream_id, numbers.Integral):
        raise TypeError(
            f"{where}: id is {stream_id!r} ({type(stream_id).__name__}); expected an int, an id "
            "that pool.open() returned"
        )
    if not 0 <= stream_id < capacity:
        raise FastGRUError(f"{where}: id {stream_id} is out of range; expected an id in [0, capacity={capacity})")
    return int(stream_id)


def check_stream_state(where, mark, stream_id):
    """Stream ``stream_id`` is open and no step holds it (``mark`` its mark in the pool)."""
    if mark == CLOSED:
        raise FastGRUError(
            f"{where}: stream {stream_id} is not open; expected the id of an open stream (pool.open() returns one)"
        )
    if mark == HELD:
        raise FastGRUError(
            f"{where}: stream {stream_id} is being advanced by a step on another thread; wait for that step to return"
        )


def check_initial_state(where, state, shape, dtype):
    """One stream's initial state: ``dtype`` (T1 of the op) and ``shape`` (a row of the op's Ho)."""
    _check_t1(where, {"initial_state": state}, "the op's W", dtype)
    if state.shape != shape:
        raise FastGRUError(
            f"{where}: initial_state has shape {state.shape}; expected {shape}, one stream's state "
            f"(hidden_size={shape[-1]}), as a row of the op's initial_hidden_state"
        )


def check_ids(where, ids):
    """``ids``: a 1-D array of integers (not bool). Whether they are in range, open and distinct is
    ``check_claim``'s."""
    if ids.dtype.kind not in "iu":
        raise TypeError(
            f"{where}: ids is {ids.dtype.name}; expected an integer dtype (the ids pool.open() returned), e.g. np.int64"
        )
    if ids.ndim != 1:
        raise FastGRUError(f"{where}: ids has shape {ids.shape}; expected a 1-D array of stream ids")


def check_claim(where, ids, marks):
    """Why a step's ``ids`` (as the caller gave them) cannot be claimed: one is out of range, not
    open, held by a running step, or repeated; ``marks`` the pool's marks by id (a bytearray).
    Called under the pool's lock, when ``_kernels/marks.claim`` refused them."""
    capacity = len(marks)
    if ids.size and not (ids.min() >= 0 and ids.max() < capacity):
        k = int(np.argmax((ids < 0) | (ids >= capacity)))
        raise FastGRUError(f"{where}: ids[{k}] is {ids[k]}; expected an id in [0, capacity={capacity})")
    first = {}
    for k, i in enumerate(ids.tolist()):
        mark = marks[i]
        if mark == CLOSED:
            raise FastGRUError(
                f"{where}: ids[{k}] is {i}, which is not open; expected ids of open streams (pool.open() returns one)"
            )
        if mark == HELD:
            raise FastGRUError(
                f"{where}: ids[{k}] is {i}, which a step on another thread is advancing; steps "
                "that run at once must have disjoint ids"
            )
        if i in first:
            raise FastGRUError(
                f"{where}: ids[{first[i]}] and ids[{k}] are both {i}; expected distinct ids "
                "(a stream advances once per step)"
            )
        first[i] = k
    raise AssertionError(f"{where}: ids {ids} were refused, yet each is open and listed once")


def check_step_arguments(where, op, lengths, A):
    """A cell's step takes neither sequence_lengths nor A; AUGRUSequence's takes A, the others' no A."""
    if op == "GRUCell" and (lengths is not None or A is not None):
        raise TypeError(
            f"{where}: a cell takes no {'sequence_lengths' if lengths is not None else 'A'}; each "
            "listed stream advances one step: pool.step(ids, X)"
        )
    if (A is None) == (op == "AUGRUSequence"):
        expected = "pool.step(ids, X, sequence_lengths, A)" if A is None else "no A: only AUGRUSequence takes A"
        raise FastGRUError(f"{where}: A is {'missing' if A is None else 'given'}; expected {expected}")


def check_batch(where, X, n):
    """X has one row per id."""
    if X.shape[0] != n:
        raise FastGRUError(f"{where}: X has batch_size {X.shape[0]} (X.shape[0]); expected {n}, one row per id of ids")


def check_out_array(where, out, shape, dtype, name="out"):
    """A preallocated result: an ndarray of ``shape`` and ``dtype`` (T1), C-contiguous and writeable."""
    if type(out) is np.ndarray and out.shape == shape and out.dtype is dtype and out.flags.carray:
        return out  # the common case, in plain comparisons
    if not isinstance(out, np.ndarray):
        raise FastGRUError(f"{where}: {name} is {type(out).__name__}; expected an ndarray of shape {shape}")
    if out.shape != shape:
        raise FastGRUError(f"{where}: {name} has shape {out.shape}; expected {shape}")
    if out.dtype != dtype:  # dtype is native: a swapped byte order differs too
        raise _out_dtype_error(f"{where}: {name}", out.dtype, dtype)
    if not (out.flags.c_contiguous and out.flags.writeable):
        raise FastGRUError(f"{where}: {name} must be a writeable C-contiguous array")
    return out
