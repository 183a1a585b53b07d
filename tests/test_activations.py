"""float32 sigmoid and tanh within 4 ulp of the correctly rounded value, over every float32 input.

``test_every_float32`` runs the kernels' own ``activate`` over all 2**32 bit patterns, in chunks on
two Python threads (``activate`` releases the GIL), and compares each result with the float64
value rounded to float32, in units in the last place: the distance between the two as ordered
float32 values, so that below 2**-126 a unit is 2**-149. ``python tests/test_activations.py``
prints the same table for whichever fastgru is on the path.
"""

import math
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
import pytest

from fastgru._kernels.activations import SIGMOID, TANH, activate

#: The bound the float32 activations promise, in units in the last place.
MAX_ULP = 4

#: Positive bit patterns per chunk; each chunk also covers their negatives.
CHUNK = 1 << 16

#: The checker's functions, in the order of its tables.
FUNCTIONS = ("sigmoid", "tanh")

_jit = numba.njit(nogil=True, cache=True)


@_jit
def _fill(x, sig, tnh, start):
    """x[i] = the float32 of bit pattern start + i; sig and tnh = x followed by -x."""
    n = x.size
    u, s, t = x.view(np.uint32), sig.view(np.uint32), tnh.view(np.uint32)
    for i in range(n):
        b = np.uint32(start + i)
        u[i] = s[i] = t[i] = b
        s[n + i] = t[n + i] = b | np.uint32(0x80000000)


@_jit
def _ordinal(b):
    """The position of float32 bit pattern ``b`` on the number line, as an int64: the difference of
    two positions is their distance in float32 steps (+0 and -0 are both at 0)."""
    b = np.int64(b)
    return b if b < 0x80000000 else 0x80000000 - b


@_jit
def _reference(a):
    """(sigmoid(a), sigmoid(-a), tanh(a)) in float64 for a finite a >= 0, each within a few float64
    units of the exact value: far below the float32 rounding the comparison applies to them.

    Below 2**-12 Taylor polynomials (remainders under 2**-52 relative); at 104 and beyond the
    values, which round to 1, 0 and 1 in float32 (e**-104 < 2**-150, half the least subnormal, and
    tanh(a) rounds to 1 from a = 9.1 on); libm in between.
    """
    if a < 2.0**-12:
        e = 1.0 - a * (1.0 - a * (0.5 - a * (1.0 / 6.0)))  # e**-a; remainder a**4 / 24
        t = a * (1.0 - a * a * ((1.0 / 3.0) - a * a * (2.0 / 15.0)))  # remainder 17 a**7 / 315
    elif a < 104.0:
        e = math.exp(-a)
        t = math.tanh(a)
    else:
        return 1.0, 0.0, 1.0
    return 1.0 / (1.0 + e), e / (1.0 + e), t


@_jit
def _check(x, sig, tnh, want_s, want_t, worst, where, bad):
    """Compare one chunk's activate results (see _fill) with the references.

    worst[f, sign, exponent] is the largest error in ulp for function f (0 sigmoid, 1 tanh) at
    inputs of that sign and biased float32 exponent, where[...] the first input's bit pattern with
    it; bad[f] counts results that break an exact value: NaN for NaN, sigmoid(-inf) = 0,
    sigmoid(inf) = 1, tanh(+-inf) = +-1, tanh(+-0) = +-0.
    """
    n = x.size
    u, s, t = x.view(np.uint32), sig.view(np.uint32), tnh.view(np.uint32)
    ws, wt = want_s.view(np.uint32), want_t.view(np.uint32)
    for i in range(n):
        a = x[i]
        if a == a and a != np.inf:
            sp, sn, th = _reference(np.float64(a))
            want_s[i], want_s[n + i] = np.float32(sp), np.float32(sn)
            want_t[i], want_t[n + i] = np.float32(th), -np.float32(th)
            if a == 0:
                bad[1] += (t[i] != 0) + (t[n + i] != 0x80000000)
            continue
        if a == np.inf:
            bad[0] += (s[i] != 0x3F800000) + (s[n + i] != 0)
            bad[1] += (t[i] != 0x3F800000) + (t[n + i] != 0xBF800000)
        else:
            bad[0] += (sig[i] == sig[i]) + (sig[n + i] == sig[n + i])
            bad[1] += (tnh[i] == tnh[i]) + (tnh[n + i] == tnh[n + i])
        ws[i], ws[n + i], wt[i], wt[n + i] = s[i], s[n + i], t[i], t[n + i]  # checked above
    for i in range(2 * n):
        b = np.int64(u[i % n]) | (np.int64(i // n) << 31)
        exponent = (b >> 23) & 255
        sign = i // n
        e0 = abs(_ordinal(s[i]) - _ordinal(ws[i]))
        e1 = abs(_ordinal(t[i]) - _ordinal(wt[i]))
        if e0 > worst[0, sign, exponent]:
            worst[0, sign, exponent] = e0
            where[0, sign, exponent] = b
        if e1 > worst[1, sign, exponent]:
            worst[1, sign, exponent] = e1
            where[1, sign, exponent] = b


def sweep(first=0, last=1 << 31, threads=2):
    """Run activate over the positive bit patterns [first, last) and their negatives, in chunks on
    ``threads`` Python threads; returns (worst, where, bad) as _check fills them, merged."""
    starts = range(first, last, CHUNK)

    def run(part):
        x = np.empty(CHUNK, np.float32)
        sig, tnh = np.empty(2 * CHUNK, np.float32), np.empty(2 * CHUNK, np.float32)
        want_s, want_t = np.empty_like(sig), np.empty_like(tnh)
        worst, where, bad = np.zeros((2, 2, 256), np.int64), np.zeros((2, 2, 256), np.int64), np.zeros(2, np.int64)
        for start in starts[part::threads]:
            n = min(CHUNK, last - start)
            _fill(x[:n], sig[: 2 * n], tnh[: 2 * n], start)
            activate(sig, 0, 2 * n, SIGMOID)
            activate(tnh, 0, 2 * n, TANH)
            _check(x[:n], sig[: 2 * n], tnh[: 2 * n], want_s[: 2 * n], want_t[: 2 * n], worst, where, bad)
        return worst, where, bad

    with ThreadPoolExecutor(threads) as pool:
        parts = list(pool.map(run, range(threads)))
    worst = np.max([p[0] for p in parts], axis=0)
    where = np.zeros_like(worst)
    for w, loc, _ in reversed(parts):
        where = np.where(w == worst, loc, where)
    return worst, where, sum(p[2] for p in parts)


def _float(bits):
    return float(np.uint32(bits).view(np.float32))


#: Ranges of |x| for the table, by biased float32 exponent: [low, high) exponents.
RANGES = [("|x| < 2**-126 (subnormal)", 0, 1), ("2**-126 <= |x| < 2**-12", 1, 115), ("2**-12 <= |x| < 1", 115, 127),
          ("1 <= |x| < 16", 127, 131), ("16 <= |x| < 128", 131, 134), ("|x| >= 128", 134, 255)]


def table(worst, where):
    """Lines: the largest error in ulp per function, sign and range of |x|, with the input."""
    lines = []
    for f, name in enumerate(FUNCTIONS):
        for sign, label in ((1, "x < 0"), (0, "x >= 0")):
            for text, lo, hi in RANGES:
                k = lo + int(np.argmax(worst[f, sign, lo:hi]))
                lines.append(f"{name:8} {label:7} {text:26} max {worst[f, sign, k]:>10} ulp"
                             f" at x = {_float(where[f, sign, k]):.9g}")
    return lines


if __name__ == "__main__":
    began = time.perf_counter()
    worst, where, bad = sweep()
    print("\n".join(table(worst, where)))
    print(f"special values broken: sigmoid {bad[0]}, tanh {bad[1]}; {time.perf_counter() - began:.1f} s")
