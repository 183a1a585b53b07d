"""Packing the weights into panels (fastgru/_kernels/layout.py, transpose.py): the layout against
NumPy, the register transpose, and the comparison that keeps the function API's packed weights
(packed_differs) catching every changed bit."""

import numpy as np
import pytest
from numba import njit

from fastgru._kernels.layout import pack_weights, packed_differs, packed_size, panels
from fastgru._kernels.memory import aligned
from fastgru._kernels.microkernel import lanes as vector_lanes
from fastgru._kernels.transpose import transpose_block, transposed_rows

DTYPES = (np.float32, np.float64)
#: (directions, inputs, hidden units, bias rows per H): whole blocks, ragged k, ragged columns,
#: a panel's last columns past 3H, one unit, both bias lengths.
SHAPES = ((1, 64, 32, 3), (2, 3, 5, 4), (1, 17, 33, 3), (2, 64, 100, 4), (1, 1, 1, 3), (1, 40, 16, 4), (1, 257, 129, 3))


def numpy_packed(W, R, B):
    """The packed layout written with NumPy: per direction and panel of NR columns of Wᵀ (then Rᵀ),
    k rows of NR columns, zero past 3H; then the bias (D, 4H), zero past B's columns."""
    d, cols, _ = W.shape
    h = R.shape[2]
    nr = panels(h, W.itemsize).nr
    n = -(-cols // nr)
    parts = []
    for M in (W, R):
        padded = np.zeros((d, n * nr, M.shape[2]), M.dtype)
        padded[:, :cols] = M
        parts.append(padded.reshape(d, n, nr, -1).transpose(0, 1, 3, 2).reshape(-1))
    bias = np.zeros((d, 4 * h), W.dtype)
    bias[:, : B.shape[1]] = B
    return np.concatenate([*parts, bias.reshape(-1)])


def weights(rng, dtype, d, i, h, b):
    return tuple(rng.standard_normal(shape).astype(dtype) for shape in ((d, 3 * h, i), (d, 3 * h, h), (d, b * h)))


def packed(W, R, B):
    out = aligned(packed_size(W.shape[0], W.shape[2], R.shape[2], W.itemsize), W.dtype)
    out[:] = np.nan  # every element must be written
    pack_weights(W, R, B, out)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_packing_writes_the_layout_numpy_writes(rng, dtype, shape):
    W, R, B = weights(rng, dtype, *shape)
    before = [a.copy() for a in (W, R, B)]
    np.testing.assert_array_equal(packed(W, R, B).view(f"u{W.itemsize}"), numpy_packed(W, R, B).view(f"u{W.itemsize}"))
    for a, b in zip((W, R, B), before):
        np.testing.assert_array_equal(a, b)  # only read


@njit
def _transposed(dst, src, ld):
    transpose_block(dst, 0, ld, src, 0, ld)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_block_is_transposed_in_registers(rng, dtype):
    lanes = vector_lanes(np.dtype(dtype))
    ld = lanes + 3  # rows farther apart than a block
    src = rng.standard_normal((lanes, ld)).astype(dtype)
    dst = np.full((lanes, ld), np.nan, dtype)
    _transposed(dst, src, ld)
    np.testing.assert_array_equal(dst[:, :lanes], src[:, :lanes].T)
    assert np.isnan(dst[:, lanes:]).all()  # nothing written past the block


@pytest.mark.parametrize("lanes", [1, 2, 4, 8, 16])
def test_the_rounds_of_swaps_transpose_any_power_of_two(lanes):
    rows = [list(range(r * lanes, (r + 1) * lanes)) for r in range(lanes)]
    columns = transposed_rows(rows, lambda x, y, mask: [(x + y)[m] for m in mask])
    assert columns == np.arange(lanes * lanes).reshape(lanes, lanes).T.tolist()


@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_weights_differ_after_any_change_of_one_element(rng, dtype):
    W, R, B = weights(rng, dtype, 2, 5, 3, 4)  # every element of each, one at a time
    out = packed(W, R, B)
    assert not packed_differs(W, R, B, out)
    for a in (W, R, B):
        for index in np.ndindex(a.shape):
            kept = a[index]
            for other in (np.nextafter(kept, dtype(np.inf)), -kept):
                a[index] = other
                assert packed_differs(W, R, B, out), (a.shape, index)
            a[index] = kept
    assert not packed_differs(W, R, B, out)


@pytest.mark.parametrize("dtype", DTYPES)
def test_packed_weights_compare_bits_not_values(rng, dtype):
    W, R, B = weights(rng, dtype, 1, 40, 37, 3)  # whole blocks and edges
    bits = np.dtype(f"u{W.itemsize}")
    W[0, 5, 9], R[0, 100, 33], B[0, 7] = 0.0, np.nan, 1.0
    out = packed(W, R, B)
    assert not packed_differs(W, R, B, out)  # the same NaN is the same
    for a, index, other in (
        (W, (0, 5, 9), -0.0),  # equal as values, not as bits
        (R, (0, 100, 33), (np.array(np.nan, dtype).view(bits) ^ 1).view(dtype)),  # another NaN payload
        (B, (0, 7), np.nextafter(dtype(1), dtype(2))),
    ):
        kept = a[index]
        a[index] = other
        assert packed_differs(W, R, B, out)
        a[index] = kept
    for _ in range(200):  # any element, in blocks or at the edges
        a = (W, R)[rng.integers(2)]
        index = tuple(rng.integers(0, n) for n in a.shape)
        kept = a[index]
        a[index] = kept + 1
        assert packed_differs(W, R, B, out), index
        a[index] = kept
