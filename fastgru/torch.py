"""fastgru.torch: the GRUs of a PyTorch model on fastgru's kernels, in one line.

``model = fastgru.torch.optimize(model)`` replaces every ``torch.nn.GRU`` and ``torch.nn.GRUCell`` of
a model by :class:`GRU` and :class:`GRUCell`, which hold the same Parameters and have torch's
attributes and methods, with a forward of their own: state_dict keys, repr, hooks and training
are unchanged. :class:`GRUCell` is a subclass of torch.nn.GRUCell; :class:`GRU` derives from
torch.nn.RNNBase, as torch.nn.GRU does, since torch.compile refuses to trace a torch.nn.GRU. In
inference (no gradient needed, CPU tensors, no autocast) ``forward`` runs fastgru's kernels;
otherwise it runs torch's own implementation (see :class:`GRU`).

The weights are packed into fastgru's layout on the first call and kept (one copy of the GRU
weights beside the Parameters); a call repacks them when a Parameter was replaced or changed,
which ``param._version`` (every in-place change: ``load_state_dict``, ``copy_``, an optimizer step),
``data_ptr()`` and ``module._apply`` (``.to()``, ``.float()``, ``.double()``, ``.half()``) tell.
Changes made through ``param.data`` bypass torch's version counter: call ``module.repack()`` after
them. A call like the module's previous one on fastgru takes a short way (``_seen_call``): its arrays
are compared with that call's by ``fastgru._validate.fits``, as a prepared op's are, and its
Parameters with those of the packed weights (``_Packs.current``).

Inside ``torch.compile`` and ``torch.export`` the GRU is the custom operator ``fastgru::gru`` (and
``fastgru::gru_cell``), with fake implementations that give the output shapes, so that a compiled
graph does not break at the GRU and an exported program holds the op. In eager mode the modules
call the same implementation directly, without the dispatcher (docs/guide/pytorch.md has its
cost in benchmarks/torch_model.py's breakdown).

Importing this module imports torch; ``import fastgru`` does not.
"""

import copy
import operator
import os
import threading
import weakref
from collections import namedtuple
from typing import List, Optional, Tuple

import numpy as np
import torch
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from ._compact import check_weight_dtype
from ._import_torch import gru_cell, gru_layers, run_layers
from ._kernels.memory import same_bits
from ._stack import GRUStack
from ._threading import request, requested
from ._validate import fits, record

__all__ = ["GRU", "GRUCell", "get_num_threads", "optimize", "set_num_threads"]

_F16, _BF16, _F32, _F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
#: The cores this process may run on: a single row shares its work with fastgru's partner thread
#: only when torch's threads leave one of them free (_with_torch_threads).
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
#: GOMP_SPINCOUNT at or below which torch's OpenMP threads (libgomp's) stop spinning within about
#: 50 µs of an operation: a sequence then shares its single row with fastgru's partner thread.
SHORT_SPINCOUNT = 10_000


def _omp_spins_briefly(environ):
    """Whether torch's OpenMP threads were told, before torch loaded libgomp, to sleep soon after an
    operation: OMP_WAIT_POLICY=passive, or GOMP_SPINCOUNT of at most SHORT_SPINCOUNT."""
    if environ.get("OMP_WAIT_POLICY", "").strip().lower() == "passive":
        return True
    try:
        return int(environ.get("GOMP_SPINCOUNT", "")) <= SHORT_SPINCOUNT
    except ValueError:
        return False


_OMP_SPINS_BRIEFLY = _omp_spins_briefly(os.environ)
#: fastgru's threads for the modules' GRUs (``set_num_threads``); None: torch's rule (_with_torch_threads).
_THREADS = None


def set_num_threads(n: Optional[int]) -> None:
    """Run the GRUs of fastgru's modules on ``n`` threads, whatever ``torch.get_num_threads()`` says
    (still at most the calling thread's ``fastgru.get_num_threads()``); ``None`` restores the
    default: at most torch's intra-op threads, and a single row on the calling thread alone while
    torch's threads hold every core (:class:`GRU`, "Threads").

    For a model whose torch layers are small beside its GRUs, called one frame at a time on few
    cores: ``torch.set_num_threads(1)`` keeps torch's OpenMP threads from spinning on the other
    cores, and ``fastgru.torch.set_num_threads(2)`` gives a single row fastgru's partner thread on
    one of them (docs/guide/pytorch.md, "Deployment"). With torch's threads still on every core,
    the two collide and a frame runs slower than by default. A process-wide setting, as torch's.

    Raises
    ------
    TypeError
        If ``n`` is not None or an integer.
    ValueError
        If ``n`` is below 1.
    """
    global _THREADS
    if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer))):
        raise TypeError(f"fastgru.torch.set_num_threads: n must be None or an integer, not {type(n).__name__}")
    if n is not None and n < 1:
        raise ValueError(f"fastgru.torch.set_num_threads: n must be at least 1 (or None for torch's rule); got {n}")
    _THREADS = None if n is None else int(n)


def get_num_threads() -> Optional[int]:
    """The count that :func:`set_num_threads` set, or None (the default: torch's rule)."""
    return _THREADS


#: Parameter dtypes the modules compute with fastgru: float32 and float64 in their own precision,
#: float16 and bfloat16 in float32 (results rounded once, to the input's dtype).
_DTYPES = (_F32, _F64, _F16, _BF16)


#: A packed entry: the weak reference of the first Parameter, the (id, _version, data_ptr) of each,
#: the attributes, the ops, the other Parameters, a copy of the bytes of each inference tensor (else
#: None), and the versions and data pointers of all, as ``current`` compares them.
_Entry = namedtuple("_Entry", "ref state attrs ops rest copies versions pointers")


class _Packs:
    """The packed weights (fastgru prepared ops) of each GRU and GRUCell, by their Parameters.

    An entry is found by the identity of the first Parameter and is valid while every Parameter
    is the same object with the same ``_version`` and ``data_ptr()``; it goes when the first
    Parameter does. An inference tensor (a model copied inside ``torch.inference_mode()``) has no
    version counter, and may still change in place inside inference mode: the entry keeps a copy
    of its bytes, compared at each lookup instead. Lookups take no lock; two threads that pack
    the same weights at once both compute the same ops, and one of them is kept.
    """

    def __init__(self):
        self._entries = {}  # id(params[0]) -> _Entry
        self._lock = threading.Lock()
        self.packs = 0  # how many times weights were packed (for the tests)

    def get(self, params, attrs, build):
        """The ops of ``params`` with attributes ``attrs``, packed by ``build(params)`` when missing or stale."""
        state = [(id(p), None if p.is_inference() else p._version, p.data_ptr()) for p in params]
        entry = self._entries.get(state[0][0])
        if (
            entry is not None
            and entry.state == state
            and entry.attrs == attrs
            and entry.ref() is params[0]
            and all(copy is None or same_bits(_bytes(p), copy) for p, copy in zip(params, entry.copies))
        ):
            return entry.ops
        ops = build(params)
        key = state[0][0]
        ref = weakref.ref(params[0], lambda ref, key=key: self._forget(key, ref))
        copies = [_bytes(p).copy() if p.is_inference() else None for p in params]
        with self._lock:
            # The entry goes with params[0] (a weak reference) and holds the others, so that no other
            # object can take their ids while it lives.
            versions, pointers = tuple(v for _, v, _ in state), tuple(d for _, _, d in state)
            self._entries[key] = _Entry(ref, state, attrs, ops, params[1:], copies, versions, pointers)
            self.packs += 1
        return ops

    def entry(self, params):
        """The entry of ``params`` (an _Entry), or None: an entry is a new object each time the
        weights are packed."""
        return self._entries.get(id(params[0]))

    def current(self, entry, params):
        """Whether ``entry`` is still the entry of ``params`` (a tuple of Parameters with version
        counters), and none of them changed since it was made (its versions and data pointers)."""
        return (
            self._entries.get(id(params[0])) is entry
            and tuple(map(_VERSION, params)) == entry.versions
            and tuple(map(_DATA_PTR, params)) == entry.pointers
        )

    def discard(self, params):
        """Forget the ops of ``params``: the next call packs them again."""
        if params and params[0] is not None:
            with self._lock:
                self._entries.pop(id(params[0]), None)

    def _forget(self, key, ref):
        """The first Parameter of an entry is gone: drop its entry (unless a newer one took the key)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.ref is ref:
                del self._entries[key]


_VERSION, _DATA_PTR = operator.attrgetter("_version"), torch.Tensor.data_ptr


def _remember(module, input, hx, names, params):
    """After a call that ran on fastgru: what a call like it compares to take the short way
    (``_seen_call``), kept when it can be: input and hx plain tensors of float32 or float64, and
    registered Parameters with version counters (no inference tensors)."""
    registered = module._parameters
    if (
        type(input) is torch.Tensor
        and (hx is None or type(hx) is torch.Tensor)
        and (input.dtype is _F32 or input.dtype is _F64)
        and all(registered.get(name) is p and not p.is_inference() for name, p in zip(names, params))
    ):
        params = tuple(params)
        entry = _PACKS.entry(params)
        if entry is None:  # forgotten meanwhile (another thread's repack): the next call packs again
            return
        arrays = record(_numpy(input), None if hx is None else _numpy(hx))
        settings = input.dtype, module.weight_dtype, module.training, module.__dict__.get("dropout")
        _SEEN[module] = arrays, settings, tuple(names), params, entry


def _seen_call(module, input, hx):
    """(ops, x, h) of a call like the last one of ``module`` that ran on fastgru (``_remember``): its
    packed ops, and input and hx as NumPy arrays, or None. Like it: plain CPU tensors whose arrays
    ``fits`` that call's (the shapes, dtype and layout; a prepared op's comparison), no gradient
    needed (grad mode off), nothing traced or autocast, the module's weight_dtype, training flag and
    dropout as they were, and its registered Parameters those of the packed ops, unchanged
    (``_Packs.current``: ``repack`` and a repacking end it). Any other call takes the full checks."""
    seen = _SEEN.get(module)
    if seen is None or type(input) is not torch.Tensor or not input.is_cpu:
        return None
    arrays, settings, names, params, entry = seen
    # hx's dtype is compared here, before ``_numpy``: a bfloat16 tensor has no NumPy array (it raises)
    if hx is not None and (type(hx) is not torch.Tensor or not hx.is_cpu or hx.dtype is not input.dtype):
        return None
    if (input.dtype, module.weight_dtype, module.training, module.__dict__.get("dropout")) != settings:
        return None
    if torch.is_grad_enabled() or torch.is_autocast_enabled("cpu") or torch.jit.is_tracing() or _traced():
        return None
    if not all(map(operator.is_, map(module._parameters.get, names), params)) or not _PACKS.current(entry, params):
        return None
    x, h = _numpy(input), None if hx is None else _numpy(hx)
    return (entry.ops, x, h) if fits(arrays, x, h) else None


def _numpy(t):
    """A CPU tensor of the compute dtype as a NumPy array (a view), under no grad mode."""
    return t.detach().numpy() if t.requires_grad else t.numpy()


def _seen_gru(stack, x, h0, bidirectional, batch_first):
    """A GRU's call that took the short way (``_seen_call``): its arrays to ``run_layers`` and back,
    as ``_gru`` does."""
    batched = x.ndim == 3
    if not batched:
        x = x[None] if batch_first else x[:, None]
        h0 = None if h0 is None else h0[:, None]
    rows = x.shape[0 if batch_first else 1] * (1 + bidirectional)
    steps = x.shape[1 if batch_first else 0]
    output, h_n = _with_torch_threads(rows, steps, run_layers, stack, x, h0, None, batch_first)
    if not batched:
        output, h_n = output[0] if batch_first else output[:, 0], h_n[:, 0]
    return torch.from_numpy(output), torch.from_numpy(h_n)


def _seen_cell(op, x, h):
    """A GRUCell's call that took the short way (``_seen_call``), as ``_gru_cell`` does."""
    batched = x.ndim == 2
    x = x if batched else x[None]
    h = np.zeros((x.shape[0], op.hidden_size), dtype=x.dtype) if h is None else h.reshape(x.shape[0], -1)
    h_new = _with_torch_threads(x.shape[0], 1, op, x, h)
    return torch.from_numpy(h_new if batched else h_new[0])


#: What each fastgru module's last call on fastgru left for the next (``_remember``; weakly held: it
#: goes with the module).
_SEEN = weakref.WeakKeyDictionary()


def _bytes(tensor):
    """A tensor's data as a NumPy uint8 array (no copy for a contiguous tensor on the CPU)."""
    return tensor.detach().contiguous().view(-1).view(torch.uint8).numpy()


_PACKS = _Packs()


def _weight(name, p):
    """A Parameter as a NumPy array for packing: float16 and bfloat16 exactly as float32."""
    if not p.is_cpu:
        raise RuntimeError(
            f"fastgru.torch: parameter {name} is on {p.device}; the input is on the CPU. Move the "
            "module and its inputs to one device (fastgru computes on the CPU)"
        )
    p = p.detach()
    return (p if p.dtype is _F32 or p.dtype is _F64 else p.float()).numpy()


def _gru_names(has_biases, num_layers, bidirectional):
    """torch.nn.GRU's names of its flat weights, in their order."""
    kinds = ("weight_ih", "weight_hh", "bias_ih", "bias_hh") if has_biases else ("weight_ih", "weight_hh")
    return [
        f"{kind}_l{k}{sfx}"
        for k in range(num_layers)
        for sfx in ("", "_reverse")[: 1 + bidirectional]
        for kind in kinds
    ]


def _pack_gru(params, has_biases, num_layers, bidirectional, weight_dtype):
    """torch.nn.GRU's flat weights as a stack of prepared GRUSequence ops, one per layer."""
    arrays = {name: _weight(name, p) for name, p in zip(_gru_names(has_biases, num_layers, bidirectional), params)}
    return GRUStack(gru_layers(arrays, weight_dtype=weight_dtype)[0])


#: torch.nn.GRUCell's weights, in the order of its Parameters (the biases only with bias=True).
_CELL_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")


def _pack_cell(params, weight_dtype):
    """A prepared GRUCell from torch.nn.GRUCell's weight_ih, weight_hh (, bias_ih, bias_hh)."""
    return gru_cell(*(_weight(name, p) for name, p in zip(_CELL_NAMES, params)), weight_dtype=weight_dtype)


def _array(t, dtype):
    """A tensor as a NumPy array of ``dtype`` (torch's): a view of it when it has that dtype."""
    if t.dtype is not dtype:
        t = t.to(dtype)
    elif t.requires_grad:  # under no_grad: the values only
        t = t.detach()
    return t.numpy()


def _inference_on_cpu(data, hx, params):
    """The checks both modules make before running on fastgru: the input and the Parameters on the
    CPU, in one dtype fastgru computes, no gradient needed (docs/guide/pytorch.md, "Gradients"), no
    CPU autocast and no jit tracing."""
    dtype = params[0].dtype
    if data.dtype is not dtype or dtype not in _DTYPES or not (data.is_cpu and params[0].is_cpu):
        return False
    if torch.is_grad_enabled() and (
        data.requires_grad or (hx is not None and hx.requires_grad) or any(p.requires_grad for p in params)
    ):
        return False
    return not (torch.is_autocast_enabled("cpu") or torch.jit.is_tracing())


def _with_torch_threads(rows, steps, fn, *args):
    """``fn(*args)`` on at most ``torch.get_num_threads()`` of fastgru's threads (torch's intra-op
    setting caps the calling thread's own count, ``fastgru.threads``, and never raises it); a
    single row (``rows``: batch_size * num_directions == 1) on the calling thread alone unless
    torch's threads leave a core free (``_CORES``), or spin only briefly (``_OMP_SPINS_BRIEFLY``)
    and the call has more than one step (one step is too short to repay the partner's wake-up).

    fastgru shares a single row with its partner thread, the two meeting at every step, and the
    partner spins for a millisecond after each call. torch's OpenMP threads spin too, for a while
    after each of torch's operations (libgomp's default GOMP_SPINCOUNT). When they hold
    every other core, the two collide, and a row runs faster alone; when they sleep soon, a
    sequence gains from the partner, a single step does not (benchmarks/torch_model.py and
    docs/guide/pytorch.md have the measurements). Rows of a batch, whose threads do not meet
    within a call, keep their threads. ``set_num_threads`` replaces this rule by its count.
    """
    n = _THREADS
    if n is None:
        n = torch.get_num_threads()
        if rows == 1 and n >= _CORES and not (_OMP_SPINS_BRIEFLY and steps > 1):
            n = 1
    before = requested()
    if n >= before:
        return fn(*args)
    request(max(1, n))
    try:
        return fn(*args)
    finally:
        request(before)


def _gru(input, hx, lengths, params, has_biases, num_layers, bidirectional, batch_first, weight_dtype=None):
    """torch.nn.GRU's computation on fastgru's kernels: the eager path and the custom op's body."""
    stack = _PACKS.get(
        params,
        ("gru", has_biases, num_layers, bidirectional, weight_dtype),
        lambda ps: _pack_gru(ps, has_biases, num_layers, bidirectional, weight_dtype),
    )
    dtype = input.dtype
    compute = dtype if dtype is _F32 or dtype is _F64 else _F32
    x = _array(input, compute)
    h0 = None if hx is None else _array(hx, compute)
    lens = None if lengths is None else lengths.numpy()
    rows = x.shape[0 if batch_first else 1] * (1 + bidirectional)
    steps = x.shape[1 if batch_first else 0]
    output, h_n = _with_torch_threads(rows, steps, run_layers, stack, x, h0, lens, batch_first)
    output, h_n = torch.from_numpy(output), torch.from_numpy(h_n)
    if compute is not dtype:
        output, h_n = output.to(dtype), h_n.to(dtype)
    return output, h_n


def _gru_cell(input, hx, params, weight_dtype=None):
    """torch.nn.GRUCell's computation on fastgru's kernels: the eager path and the custom op's body."""
    op = _PACKS.get(params, ("cell", weight_dtype), lambda ps: _pack_cell(ps, weight_dtype))
    dtype = input.dtype
    compute = dtype if dtype is _F32 or dtype is _F64 else _F32
    x = _array(input, compute)
    h = np.zeros((x.shape[0], op.hidden_size), dtype=x.dtype) if hx is None else _array(hx, compute)
    h_new = torch.from_numpy(_with_torch_threads(x.shape[0], 1, op, x, h))
    return h_new if compute is dtype else h_new.to(dtype)


@torch.library.custom_op("fastgru::gru", mutates_args=(), device_types="cpu")
def gru_op(
    input: torch.Tensor,
    hx: Optional[torch.Tensor],
    lengths: Optional[torch.Tensor],
    params: List[torch.Tensor],
    has_biases: bool,
    num_layers: int,
    bidirectional: bool,
    batch_first: bool,
    weight_dtype: Optional[str] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``torch.ops.fastgru.gru``: torch.nn.GRU's forward in inference on fastgru's kernels.

    input (S, N, I), or (N, S, I) with batch_first; hx (num_layers*D, N, H) or None for zeros;
    lengths (N,) int64 or None (every step): row b runs its first lengths[b] steps, its output is
    zero past them, as a packed sequence gives; params torch.nn.GRU's flat weights, in its order;
    weight_dtype None, 'bfloat16' or 'int8' (:func:`optimize`). Returns (output, h_n) as
    torch.nn.GRU does, in the input's dtype.
    """
    return _gru(input, hx, lengths, params, has_biases, num_layers, bidirectional, batch_first, weight_dtype)


@gru_op.register_fake
def _gru_fake(input, hx, lengths, params, has_biases, num_layers, bidirectional, batch_first, weight_dtype=None):
    d, hidden = 1 + bidirectional, params[1].shape[1]
    n, s = (input.shape[0], input.shape[1]) if batch_first else (input.shape[1], input.shape[0])
    output = input.new_empty((n, s, d * hidden) if batch_first else (s, n, d * hidden))
    return output, input.new_empty((num_layers * d, n, hidden))


@torch.library.custom_op("fastgru::gru_cell", mutates_args=(), device_types="cpu")
def gru_cell_op(
    input: torch.Tensor, hx: Optional[torch.Tensor], params: List[torch.Tensor], weight_dtype: Optional[str] = None
) -> torch.Tensor:
    """``torch.ops.fastgru.gru_cell``: torch.nn.GRUCell's forward in inference on fastgru's kernels.

    input (N, I); hx (N, H) or None for zeros; params weight_ih, weight_hh and, with bias,
    bias_ih, bias_hh; weight_dtype as :func:`gru_op`'s. Returns h' (N, H) in the input's dtype.
    """
    return _gru_cell(input, hx, params, weight_dtype)


@gru_cell_op.register_fake
def _gru_cell_fake(input, hx, params, weight_dtype=None):
    return input.new_empty((input.shape[0], params[1].shape[1]))


def _traced():
    """True while torch traces the call (torch.compile, torch.export, a dispatch or function mode):
    then the modules call the custom ops, which the trace records; else their bodies directly."""
    return (
        torch.compiler.is_compiling()
        or torch._C._len_torch_dispatch_stack() > 0
        or torch._C._is_torch_function_mode_enabled()
    )


def _share(cls, module, weight_dtype):
    """A ``cls`` holding ``module``'s Parameters, buffers, hooks and attributes (the same objects),
    in containers of its own: a change of either module's Parameters is seen by both; fastgru
    stores its weights as ``weight_dtype`` says (checked here: a bad value fails now, not at the
    first call)."""
    check_weight_dtype(f"fastgru.torch.{cls.__name__}", weight_dtype, None)
    new = cls.__new__(cls)
    new.__dict__.update(
        {
            key: copy.copy(value) if isinstance(value, (dict, list, set)) else value
            for key, value in module.__dict__.items()
        }
    )
    new.weight_dtype = weight_dtype
    return new


class _Repacked:
    """What :class:`GRU` and :class:`GRUCell` share: ``repack``, also when the module moves or
    changes dtype (``_apply``: ``to``, ``float``, ``cpu``...). ``_params``: the Parameters packed."""

    def repack(self) -> None:
        """Forget the packed weights: the next call packs the Parameters again. Needed only after
        a change made through ``param.data``, which torch's version counter does not see."""
        _PACKS.discard(self._params())

    def _apply(self, fn, recurse=True):
        self.repack()
        return super()._apply(fn, recurse)


class GRU(_Repacked, torch.nn.RNNBase):
    """``torch.nn.GRU`` whose inference runs on fastgru's kernels: the same arguments, Parameters
    (names, shapes, state_dict keys), attributes, repr, inputs and outputs.

    Build it like ``torch.nn.GRU(...)``, or from a GRU with :meth:`from_module` (sharing its
    Parameters), or let :func:`optimize` swap the GRUs of a model. Like torch.nn.GRU it derives
    from ``torch.nn.RNNBase`` (``mode == "GRU"``), but not from torch.nn.GRU itself: torch.compile
    refuses to trace any torch.nn.GRU instance (its graph breaks there), whatever its forward.

    ``forward(input, hx=None)`` takes and returns what torch.nn.GRU's does: (L, N, input_size), or
    (N, L, input_size) with batch_first, or (L, input_size) unbatched, or a ``PackedSequence``
    (sorted or not; the output is packed alike, with the input's indices); ``hx`` optional. It runs
    fastgru's kernels when all of these hold, and torch.nn.GRU's own forward otherwise, so that
    training, other devices, autocast and ``torch.jit.trace`` (ONNX export) behave as before:

    - no gradient is needed: grad mode is off (``torch.no_grad()``, ``torch.inference_mode()``), or
      neither the Parameters nor input nor hx require grad. Grad mode is torch's setting of each
      thread: the threads of a pool started inside ``torch.no_grad()`` have it on, and run torch's
      own GRU (correct, but slow) unless each enters ``torch.no_grad()`` itself or the model's
      Parameters do not require grad (``model.requires_grad_(False)``);
    - eval mode, or no dropout between layers (dropout > 0 in training mode is random);
    - input, hx and Parameters on the CPU, of one dtype among float32 and float64 (computed in
      their own precision), float16 and bfloat16 (computed in float32, the whole stack, and
      rounded once to the input's dtype);
    - no CPU autocast, no ``torch.jit`` tracing, and shapes torch accepts (torch raises its own
      errors otherwise), with at least one step and one row.

    Threads: fastgru's kernels run on at most ``torch.get_num_threads()`` threads, and at most the
    calling thread's ``fastgru.get_num_threads()``; a single row (batch 1, one direction) on the
    calling thread alone, without fastgru's partner thread, unless torch's threads leave a core
    free: torch's OpenMP threads and the partner spin after their work and would take each
    other's cores. :func:`set_num_threads` sets the count instead. Results do not depend on the
    thread count, nor on which rows share a batch.

    Examples
    --------
    >>> import torch, fastgru.torch
    >>> gru = fastgru.torch.GRU.from_module(torch.nn.GRU(8, 16, num_layers=2, batch_first=True))
    >>> gru
    GRU(8, 16, num_layers=2, batch_first=True)
    >>> with torch.inference_mode():
    ...     output, h_n = gru(torch.randn(3, 5, 8))
    >>> output.shape, h_n.shape
    (torch.Size([3, 5, 16]), torch.Size([2, 3, 16]))
    """

    def __init__(self, *args, **kwargs):
        """torch.nn.GRU's arguments: input_size, hidden_size, num_layers=1, bias=True,
        batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None."""
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    #: None (exact weights), 'bfloat16' or 'int8': how fastgru stores W and R (:func:`optimize`).
    weight_dtype = None

    @classmethod
    def from_module(cls, module: torch.nn.GRU, *, weight_dtype: Optional[str] = None) -> "GRU":
        """A :class:`GRU` holding ``module``'s Parameters (shared, not copied), buffers, hooks,
        attributes and training flag; ``module`` itself is left as it is. ``weight_dtype``: as
        :func:`optimize`'s."""
        if not isinstance(module, (torch.nn.GRU, GRU)):
            raise TypeError(f"fastgru.torch.GRU.from_module: got {type(module).__name__}; expected a torch.nn.GRU")
        return _share(cls, module, weight_dtype)

    def _params(self):
        return self._flat_weights

    def forward(self, input, hx=None):
        """torch.nn.GRU's forward: on fastgru's kernels when the conditions of the class hold."""
        seen = _seen_call(self, input, hx)
        if seen is not None:
            return _seen_gru(*seen, self.bidirectional, self.batch_first)
        params = self._weights()
        packed = isinstance(input, PackedSequence)
        data = input.data if packed else input
        if not self._fast(data, hx, params, packed):
            return torch.nn.GRU.forward(self, input, hx)
        if packed:
            return self._forward_packed(input, hx, params)
        given_hx = hx
        batched = data.dim() == 3
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
            hx = None if hx is None else hx.unsqueeze(1)
        args = (input, hx, None, params, self.bias, self.num_layers, self.bidirectional, self.batch_first)
        args += (self.weight_dtype,)
        if _traced():
            output, h_n = gru_op(*args)
        else:
            output, h_n = _gru(*args)
            _remember(self, data, given_hx, self._flat_weights_names, params)
        if not batched:
            return output.squeeze(0 if self.batch_first else 1), h_n.squeeze(1)
        return output, h_n

    def _weights(self):
        """``_flat_weights``, brought up to date as torch's forward does with ``_update_flat_weights``
        (torch.func.functional_call and parametrizations swap the Parameters), which calls hasattr and
        getattr for each weight: here a look at ``_parameters`` first."""
        flat, registered = self._flat_weights, self._parameters
        for name, weight in zip(self._flat_weights_names, flat):
            if registered.get(name) is not weight:
                self._update_flat_weights()
                return self._flat_weights
        return flat

    def _fast(self, data, hx, params, packed):
        """Whether this call runs on fastgru (see the class docstring), with cheap checks only."""
        dtype = params[0].dtype
        if not _inference_on_cpu(data, hx, params):
            return False
        if self.training and self.dropout > 0 and self.num_layers > 1:
            return False
        rank = data.dim()
        if (rank != 2 if packed else rank not in (2, 3)) or data.shape[-1] != self.input_size or data.numel() == 0:
            return False
        if hx is None:
            return True
        if hx.dtype is not dtype or not hx.is_cpu:
            return False
        rows = self.num_layers * (1 + self.bidirectional)
        if packed or rank == 3:
            batch = (data.shape[0] if self.batch_first else data.shape[1]) if not packed else None
            return (
                hx.dim() == 3
                and hx.shape[0] == rows
                and hx.shape[2] == self.hidden_size
                and (packed or hx.shape[1] == batch)
            )
        return tuple(hx.shape) == (rows, self.hidden_size)

    def _forward_packed(self, input, hx, params):
        """A PackedSequence: padded (batch first, the original order of the rows) with its lengths,
        run, and packed again with the input's batch_sizes and indices."""
        padded, lengths = pad_packed_sequence(input, batch_first=True)
        if hx is not None and hx.shape[1] != padded.shape[0]:
            return torch.nn.GRU.forward(self, input, hx)  # torch's own error
        args = (padded, hx, lengths, params, self.bias, self.num_layers, self.bidirectional, True, self.weight_dtype)
        output, h_n = gru_op(*args) if _traced() else _gru(*args)
        if input.sorted_indices is not None:
            output, lengths = output.index_select(0, input.sorted_indices), lengths[input.sorted_indices]
        data = pack_padded_sequence(output, lengths, batch_first=True).data
        return PackedSequence(data, input.batch_sizes, input.sorted_indices, input.unsorted_indices), h_n


class GRUCell(_Repacked, torch.nn.GRUCell):
    """``torch.nn.GRUCell`` whose inference runs on fastgru's kernels; the same arguments,
    Parameters, inputs and outputs.

    ``forward(input, hx=None)``: input (N, input_size) or (input_size,); hx (N, hidden_size),
    (hidden_size,) or None for zeros; returns h' of hx's shape. It runs on fastgru's kernels under
    the conditions of :class:`GRU` (no gradient needed, CPU, one dtype, no autocast nor jit tracing,
    a shape torch accepts, at least one row), and torch's own implementation otherwise; threads as
    there. Unlike :class:`GRU` it is a subclass of torch.nn.GRUCell (torch.compile traces those).

    Examples
    --------
    >>> import torch, fastgru.torch
    >>> cell = fastgru.torch.GRUCell.from_module(torch.nn.GRUCell(8, 16))
    >>> h = torch.zeros(3, 16)
    >>> with torch.inference_mode():
    ...     for x in torch.randn(5, 3, 8):
    ...         h = cell(x, h)
    >>> h.shape
    torch.Size([3, 16])
    """

    #: As :attr:`GRU.weight_dtype`.
    weight_dtype = None

    @classmethod
    def from_module(cls, module: torch.nn.GRUCell, *, weight_dtype: Optional[str] = None) -> "GRUCell":
        """A :class:`GRUCell` holding ``module``'s Parameters (shared, not copied), buffers, hooks
        and training flag; ``module`` itself is left as it is. ``weight_dtype``: as :func:`optimize`'s."""
        if not isinstance(module, torch.nn.GRUCell):
            raise TypeError(
                f"fastgru.torch.GRUCell.from_module: got {type(module).__name__}; expected a torch.nn.GRUCell"
            )
        return _share(cls, module, weight_dtype)

    def _params(self):
        if self.bias:
            return [self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh]
        return [self.weight_ih, self.weight_hh]

    def forward(self, input, hx=None):
        """torch.nn.GRUCell's forward: on fastgru's kernels when the conditions of the class hold."""
        seen = _seen_call(self, input, hx)
        if seen is not None:
            return _seen_cell(*seen)
        params = self._params()
        if not self._fast(input, hx, params):
            return super().forward(input, hx)
        given, given_hx = input, hx
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
            hx = None if hx is None else hx.unsqueeze(0)
        args = (input, hx, params, self.weight_dtype)
        if _traced():
            h_new = gru_cell_op(*args)
        else:
            h_new = _gru_cell(*args)
            _remember(self, given, given_hx, _CELL_NAMES[: len(params)], params)
        return h_new if batched else h_new.squeeze(0)

    def _fast(self, input, hx, params):
        """Whether this call runs on fastgru (see the class docstring), with cheap checks only."""
        dtype = params[0].dtype
        if not _inference_on_cpu(input, hx, params):
            return False
        if input.dim() not in (1, 2) or input.shape[-1] != self.input_size:
            return False
        if input.dim() == 2 and input.shape[0] == 0:
            return False
        if hx is None:
            return True
        expected = (self.hidden_size,) if input.dim() == 1 else (input.shape[0], self.hidden_size)
        return hx.dtype is dtype and hx.is_cpu and tuple(hx.shape) == expected


def optimize(model: torch.nn.Module, *, inplace: bool = False, weight_dtype: Optional[str] = None) -> torch.nn.Module:
    """``model`` with every ``torch.nn.GRU`` and ``torch.nn.GRUCell`` replaced by :class:`GRU` and
    :class:`GRUCell`, which run inference on fastgru's kernels.

    Parameters
    ----------
    model : torch.nn.Module
        Any module; a GRU or GRUCell itself is replaced too. Only modules of exactly those types
        are replaced: a subclass (which may override forward) is left alone, as are fastgru's.
    inplace : bool
        False (default): a deep copy of ``model`` is modified and returned, with copies of the
        Parameters; ``model`` is unchanged. True: ``model``'s GRUs are replaced in it, by modules
        holding the same Parameter objects (an optimizer over them, or later edits, still apply),
        and ``model`` is returned (or the new module when ``model`` is itself a GRU or GRUCell).
    weight_dtype : {None, 'bfloat16', 'int8', 'bfloat16x3'}
        How fastgru stores W and R: None (default) exact; 'bfloat16' or 'int8' (symmetric, one
        scale per row of each weight matrix), read and computed in float32, for float32, float16
        and bfloat16 Parameters (docs/semantics.md, "Compact weights": the error bounds). int8
        here is dynamic int8 GRU inference without ``torch.ao.quantization``. 'bfloat16x3':
        exact weights, multiplied as three bfloat16 products on matrix tiles (Intel AMX) at 16
        rows or more (docs/semantics.md, "Matrix tiles").

    Returns
    -------
    torch.nn.Module
        The model, called as before. A module shared by several parents becomes one replacement.

    Examples
    --------
    >>> import torch, fastgru.torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GRU(8, 16, batch_first=True))
    >>> fast = fastgru.torch.optimize(model)
    >>> type(fast[1]).__name__, type(fast[1]).__module__, type(model[1]).__module__
    ('GRU', 'fastgru.torch', 'torch.nn.modules.rnn')
    >>> fast.state_dict().keys() == model.state_dict().keys()
    True
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"fastgru.torch.optimize: got {type(model).__name__}; expected a torch.nn.Module")
    check_weight_dtype("fastgru.torch.optimize", weight_dtype, None)
    if not inplace:
        # Outside inference mode even when called inside it: the copy's Parameters are then ordinary
        # tensors, whose version counters let calls take their plans (an inference tensor has none,
        # and each call would compare its bytes instead).
        with torch.inference_mode(False):
            model = copy.deepcopy(model)
    done = {}
    top = _replacement(model, done, weight_dtype)
    if top is not None:
        return top
    _swap(model, done, set(), weight_dtype)
    return model


def _replacement(module, done, weight_dtype):
    """fastgru's module for a torch.nn.GRU or GRUCell (one per module object), else None."""
    kind = {torch.nn.GRU: GRU, torch.nn.GRUCell: GRUCell}.get(type(module))
    if kind is None:
        return None
    if id(module) not in done:
        done[id(module)] = (
            module,
            kind.from_module(module, weight_dtype=weight_dtype),
        )  # the module kept alive: its id stays its own
    return done[id(module)][1]


def _swap(module, done, seen, weight_dtype):
    """Replace the GRUs and GRUCells among ``module``'s descendants, each module visited once."""
    seen.add(id(module))
    for name, child in list(module._modules.items()):
        if child is None:
            continue
        new = _replacement(child, done, weight_dtype)
        if new is not None:
            setattr(module, name, new)
        elif id(child) not in seen:
            _swap(child, done, seen, weight_dtype)
