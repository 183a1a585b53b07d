"""The packed weights of the function API (``fastgru.gru_cell(X, H, W, R, B)`` and the others),
kept across calls while the caller's weights stay the same; a call of one row and one step packs
nothing (``_dispatch.Unpacked``) and does not come here.

Packing W and R into the kernels' panels costs a pass that reads them and writes as much, about
what a call of a few rows of a prepared op costs again, so a loop over ``fastgru.gru_cell(...)``
with the same weights would pay it at every step. The last ``KEEP`` packed sets, up to
``KEEP_BYTES`` in all, are kept, by the identity of the arrays given. A call whose W, R and B are
the same objects as a kept set's reuses its packed weights when packing them again would write the
same bits (``layout.packed_differs``: a compiled comparison of the caller's arrays with the packed
ones, NaN payloads included, that reads each once); weights changed in place, or other arrays,
are packed again. A stale result is therefore impossible, whatever the caller does with its arrays,
and nothing of the caller's is copied to be kept.
"""

import threading

from ._dispatch import Packed, packing_inputs
from ._kernels.layout import packed_differs

#: Packed weight sets kept, and their bytes in all: a set larger than that is packed per call.
KEEP = 8
KEEP_BYTES = 64 << 20

_kept = {}
_lock = threading.Lock()


def packed_weights(spec, W, R, B):
    """The Packed of ``spec`` and these weights: the kept one if W, R and B are the same arrays and
    still pack to its bits, else a new one (kept when it is small enough)."""
    key = spec, id(W), id(R), id(B)
    packed = _kept.get(key)
    if packed is not None and not packed_differs(*packing_inputs(spec, W, R, B), packed.weights):
        return packed
    packed = Packed(spec, W, R, B)
    if packed.weights.nbytes <= KEEP_BYTES:
        with _lock:
            _kept.pop(key, None)
            while _kept and (len(_kept) >= KEEP or packed.weights.nbytes + _bytes() > KEEP_BYTES):
                del _kept[next(iter(_kept))]  # the oldest
            _kept[key] = packed
    return packed


def _bytes():
    return sum(p.weights.nbytes for p in _kept.values())
