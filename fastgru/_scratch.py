"""Buffers each Python thread keeps across calls, so that a serving loop allocates nothing: the
kernels' float and int64 scratch, sequence_lengths converted to int64, inputs and results of
16-bit dtypes in float32, and a mailbox for forced one-row pair calls.

Each buffer grows (to at least twice its size) when a call needs more; a buffer of more than
``_tuning.KEEP_SCRATCH_BYTES`` is made for its call only, so that one large call does not pin
memory in every thread that made one.
"""

import threading

import numpy as np

from . import _tuning
from ._kernels import pair
from ._kernels.memory import aligned

_I64 = np.dtype(np.int64)
_LENGTHS = "lengths" + _I64.char  # kept()'s key of the lengths buffer

#: Each Python thread's buffers, by name.
_kept = threading.local()


def kept(name, size, dtype):
    """The calling thread's buffer ``name`` of ``dtype``, of at least ``size`` elements, 64-byte aligned."""
    buffers = _kept.__dict__
    key = name + dtype.char
    buf = buffers.get(key)
    if buf is not None and buf.shape[0] >= size:
        return buf
    if size * dtype.itemsize > _tuning.KEEP_SCRATCH_BYTES:
        return aligned(size, dtype)
    buf = buffers[key] = aligned(max(size, 0 if buf is None else 2 * buf.shape[0]), dtype)
    return buf


def work(floats, ints, dtype):
    """The kernels' float (``dtype``) and int64 scratch, of at least ``floats`` and ``ints`` elements."""
    pair = _kept.__dict__.get(dtype.char)  # the common case first: it is part of every call
    if pair is not None and pair[0].shape[0] >= floats and pair[1].shape[0] >= ints:
        return pair
    pair = kept("work", floats, dtype), kept("iwork", ints, _I64)
    if pair[0].shape[0] * dtype.itemsize <= _tuning.KEEP_SCRATCH_BYTES:
        _kept.__dict__[dtype.char] = pair
    return pair


def lengths(values, n, s):
    """sequence_lengths as the kernels take them: int64, C-contiguous, at least n of them. ``values``
    itself when it is that already, else converted into a kept buffer (the values are checked, so
    the cast is exact); None means s for every row."""
    if values is not None and values.dtype is _I64 and values.flags.c_contiguous:
        return values
    last = _kept.__dict__.get("lengths_view")  # (buffer, n, its first n) of the previous call
    if last is not None and last[1] == n and last[0] is _kept.__dict__.get(_LENGTHS):
        view = last[2]
    else:
        buf = kept("lengths", n, _I64)
        view = buf[:n]
        _kept.lengths_view = buf, n, view
    if values is None:
        view.fill(s)
    else:
        np.copyto(view, values, casting="unsafe")
    return view


def converted(name, a, dtype):
    """``a`` in ``dtype``, C-contiguous and writeable: itself when it is that already, else a copy into
    the kept buffer ``name`` (shaped like ``a``). The kernels only read it; a read-only array would
    make Numba compile (and cache) a second variant of every kernel for it."""
    if a.dtype is dtype and a.flags.carray:  # C-contiguous, aligned and writeable already
        return a
    buf = kept(name, a.size, dtype)[: a.size].reshape(a.shape)
    np.copyto(buf, a, casting="unsafe")
    return buf


def mailbox():
    """The calling thread's mailbox for ``run_pair`` without the partner: nobody serves it."""
    box = _kept.__dict__.get("mailbox")
    if box is None:
        box = _kept.mailbox = pair.new_mailbox()
    return box
