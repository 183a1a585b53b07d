"""The packed weights of the function API (``fastgru.gru_cell(X, H, W, R, B)`` and the others),
kept across calls while the caller's weights stay the same.

Packing costs a pass over W and R into a layout of their own (at hidden size 256, several times
a prepared cell's call), so a loop over ``fastgru.gru_cell(...)`` with the same weights would pay it
at every step. The last ``KEEP`` weight sets, up to ``KEEP_BYTES`` in all, are kept, each with a
copy of the caller's W, R and B. A call whose W, R and B are the same objects as a kept set's, with
the same bits as its copies (a compiled comparison, NaN payloads included), reuses its packed
weights; weights changed in place, or other arrays, are packed again. A stale result is therefore
impossible, whatever the caller does with its arrays. Only C-contiguous weights of the op's dtype
are kept (others are converted, then packed, per call).
"""

import threading

from ._dispatch import Packed
from ._kernels.memory import same_bits

#: Weight sets kept (each holds its packed weights and a copy of the caller's), and their bytes in
#: all: a set larger than that is packed per call.
KEEP = 8
KEEP_BYTES = 64 << 20

_kept = {}
_lock = threading.Lock()


def packed_weights(spec, W, R, B):
    """The Packed of ``spec`` and these weights: the kept one if W, R and B are the same arrays with
    the same bits as when it was packed, else a new one (kept when the weights can be)."""
    key = spec, id(W), id(R), id(B)
    entry = _kept.get(key)
    if entry is not None:
        copies, packed, _ = entry
        if all(same_bits(given, copy) for given, copy in zip((W, R, B), copies) if copy is not None):
            return packed
    packed = Packed(spec, W, R, B)
    size = packed.weights.nbytes + sum(a.nbytes for a in (W, R, B) if a is not None)
    if size <= KEEP_BYTES and all(a is None or (a.dtype == spec.dtype and a.flags.c_contiguous) for a in (W, R, B)):
        copies = tuple(None if a is None else a.copy() for a in (W, R, B))
        with _lock:
            _kept.pop(key, None)
            while _kept and (len(_kept) >= KEEP or size + sum(e[2] for e in _kept.values()) > KEEP_BYTES):
                del _kept[next(iter(_kept))]  # the oldest
            _kept[key] = copies, packed, size
    return packed
