"""Gate activations for the kernels: relu, sigmoid and tanh, selected by integer code.

float64 uses libm (``math.tanh``, ``math.exp``), within about an ulp.

float32 sigmoid and tanh are fastgru's own, branch-free so that LLVM vectorises the loops of
``activate`` (libm's ``tanhf`` and ``expf`` are scalar calls of ~10 ns and ~2 ns). Both rest on
e**y for y = -k|x| <= 0, computed as Cephes and SLEEF do: y = n ln 2 + r with n = round(y / ln 2)
and r exact (ln 2 split in two constants, Cody and Waite), e**r - 1 from a minimax polynomial in
r, and 2**n built from exponent bits. Then, with a = |x|:

- sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, e = e**-a = 2**n e**r, with
  numerator and denominator taken 2**64 times larger, so that the division is the one rounding
  and also rounds into the subnormals (gradual underflow) for x from -87.3 down to -103.9;
- tanh(x) = sign(x) (1 - e) / (1 + e) with e = e**-2a, e - 1 and e + 1 computed as
  2**n (e**r - 1) + (2**n - 1) and 2**n (e**r - 1) + (2**n + 1), so that nothing cancels near 0.

Error bound: at most 4 ulp from the correctly rounded value, for every float32 input; below
2**-126 an ulp is 2**-149. Measured over all 2**32 inputs (AMD EPYC Zen 4, AVX-512 and FMA): at
most 2 ulp for sigmoid and for tanh, and the same compiled for a processor without FMA
(NUMBA_CPU_NAME=generic). tests/test_activations.py proves the bound on the machine that runs it:
``test_every_float32`` runs the kernels' own ``activate`` over every bit pattern and compares
each result with its float64 value rounded to float32; ``test_through_the_ops`` checks that
gru_cell, gru_sequence and augru_sequence return the same values (within the bound) on a sample.
The multiply-adds are explicit (``llvm.fmuladd``), so that whether each is fused depends on the
processor only, not on the code a kernel inlines them into.

The limits are exact: sigmoid(-inf) = 0, sigmoid(inf) = 1, tanh(+-inf) = +-1, tanh(-0) = -0;
NaN stays NaN (comparisons with NaN are false, so each clamp below leaves a NaN untouched, and
the arithmetic after it propagates it).

With the JIT disabled (NUMBA_DISABLE_JIT=1), float32 runs the same algorithm in NumPy scalars,
unfused, and float64 NumPy's functions.
"""

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload, register_jitable

from .._codes import SIGMOID, TANH
from .._config import JIT_OPTIONS, kernel
from .memory import load, store

_ONE = np.float32(1)
_MINUS_ONE = np.float32(-1)
_MINUS_TWO = np.float32(-2)
_TWO_64 = np.float32(2.0**64)

# sigmoid: e**-a < 2**-150 (half the least subnormal) rounds to 0 from a = 103.98 on.
_SIGMOID_CLAMP = np.float32(104)
# tanh(a) rounds to 1 from a = 13 ln 2 = 9.01 on, and so does the formula from 10 on.
_TANH_CLAMP = np.float32(10)

# Range reduction of y = k a (k = -1, -2): y = n ln 2 + r, n = round(y log2(e)), |r| <= ln 2 / 2
# (plus 2e-6, from log2(e)'s rounding).
_MINUS_LOG2E = np.float32(-1.44269504088896341)
_MINUS_TWO_LOG2E = np.float32(-2.88539008177792682)  # -2 log2(e), exactly twice the above
# Adding 1.5 * 2**23 to a float32 of magnitude below 2**22 rounds it to an integer, which the sum
# then holds in the low bits of its significand, in two's complement.
_SHIFTER = np.float32(12582912)
# ln 2 = _LN2_HI + _LN2_LO to 2**-37: _LN2_HI has 9 significant bits, so that n * _LN2_HI and
# y - n * _LN2_HI are exact for the n here (Cody and Waite).
_LN2_HI = np.float32(0.693359375)
_LN2_LO = np.float32(-2.12194440e-4)
# e**r - 1 = r + r**2 P(r) on |r| <= ln 2 / 2, P of degree 4: minimax for the relative error of
# e**r - 1 (1.3e-8, a fifth of a float32 unit).
_P0 = np.float32(0.49999997)
_P1 = np.float32(0.16666543)
_P2 = np.float32(0.0416672)
_P3 = np.float32(0.0083665475)
_P4 = np.float32(0.0013882517)
# 2**n from n's bits in t (see _SHIFTER): shifted into the exponent field, plus a biased exponent.
# sigmoid takes 2**(n + 64), a normal float32 for every n here (n >= -150).
_POW2_BITS = 127 << 23
_POW2_64_BITS = (127 + 64) << 23


def float_bits(x):
    """The bits of a float32 as an int (an int32 in compiled code)."""
    return int(np.float32(x).view(np.int32))


def bits_float(bits):
    """The float32 whose bits are the low 32 bits of the integer ``bits``."""
    return np.uint32(int(bits) & 0xFFFFFFFF).view(np.float32)


def fmuladd(a, b, c):
    """a * b + c; in compiled code fused into one rounding where the processor has FMA."""
    return a * b + c


def fma(a, b, c):
    """a·b + c rounded once (float32): in compiled code on every target (the processor's FMA, or
    libm's); in Python through float64, which can round twice (NUMBA_DISABLE_JIT runs are for
    coverage, not bits)."""
    return np.float32(np.float64(a) * np.float64(b) + np.float64(c))


@intrinsic
def _float_bits(typingctx, x):
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(x), codegen


@intrinsic
def _bits_float(typingctx, bits):
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[0], signature.args[0], types.int64)
        return builder.bitcast(builder.trunc(value, ir.IntType(32)), ir.FloatType())

    return types.float32(bits), codegen


def _float32_call(name):
    """An intrinsic of three float32 that calls LLVM's ``name`` (``llvm.fmuladd``, ``llvm.fma``)."""

    @intrinsic
    def call(typingctx, a, b, c):
        if not (a == b == c == types.float32):
            return None

        def codegen(context, builder, signature, args):
            f32 = ir.FloatType()
            fn = builder.module.declare_intrinsic(name, [f32], ir.FunctionType(f32, [f32, f32, f32]))
            return builder.call(fn, args)

        return types.float32(a, b, c), codegen

    return call


# Compiled code: a bitcast (free in a vector register); LLVM's multiply-add, fused wherever the
# processor has FMA, whatever the code around it (a product and a sum may or may not be contracted);
# and LLVM's fused multiply-add, rounded once on every target (the matrix tiles' twins).
_fmuladd, _fma = _float32_call("llvm.fmuladd"), _float32_call("llvm.fma")
overload(float_bits)(lambda x: lambda x: _float_bits(x))
overload(bits_float)(lambda bits: lambda bits: _bits_float(bits))
overload(fmuladd)(lambda a, b, c: lambda a, b, c: _fmuladd(a, b, c))
overload(fma)(lambda a, b, c: lambda a, b, c: _fma(a, b, c))


@register_jitable(**JIT_OPTIONS)
def _reduce(a, k, k_log2e):
    """(t, r) for float32 a >= 0 (or NaN) and k = -1 or -2, k a >= -104: k a = n ln 2 + r, with
    n in t's low bits. t comes from a directly, so that k a is off the critical path."""
    t = fmuladd(a, k_log2e, _SHIFTER)
    n = t - _SHIFTER  # round(k a log2(e)), exactly
    r = fmuladd(-n, _LN2_HI, a * k)  # exact
    return t, fmuladd(-n, _LN2_LO, r)


@register_jitable(**JIT_OPTIONS)
def _expm1_reduced(r):
    """e**r - 1 for |r| <= ln 2 / 2 + 2e-6, in float32."""
    p = fmuladd(_P4, r, _P3)
    p = fmuladd(p, r, _P2)
    p = fmuladd(p, r, _P1)
    p = fmuladd(p, r, _P0)
    return fmuladd(p, r * r, r)


@register_jitable(**JIT_OPTIONS)
def _pow2(t, bias):
    """2**(n + e) as a float32, for n in t's low bits (see _SHIFTER) and bias = (127 + e) << 23."""
    return bits_float((float_bits(t) << 23) + bias)


@register_jitable(**JIT_OPTIONS)
def sigmoid32(x):
    """1 / (1 + e**-x) in float32 (see the module's docstring)."""
    a = abs(x)
    t, r = _reduce(_SIGMOID_CLAMP if a > _SIGMOID_CLAMP else a, _MINUS_ONE, _MINUS_LOG2E)
    s = _pow2(t, _POW2_64_BITS)
    u = fmuladd(_expm1_reduced(r), s, s)  # 2**64 e**-a: exact scaling, one rounding
    return (_TWO_64 if x >= 0 else u) / (u + _TWO_64)


@register_jitable(**JIT_OPTIONS)
def tanh32(x):
    """tanh in float32 (see the module's docstring)."""
    a = abs(x)
    t, r = _reduce(_TANH_CLAMP if a > _TANH_CLAMP else a, _MINUS_TWO, _MINUS_TWO_LOG2E)
    s = _pow2(t, _POW2_BITS)  # 2**n, n >= -29: s - 1 is exact for n >= -24, s + 1 for n >= -23
    q = _expm1_reduced(r)
    # (e - 1) / (e + 1) <= 0, whose sign copysign replaces.
    return np.copysign(fmuladd(q, s, s - _ONE) / fmuladd(q, s, s + _ONE), x)


def tanh(x):
    """tanh in the precision of ``x`` (float32: tanh32; float64: NumPy's when Numba's JIT is disabled)."""
    return tanh32(x) if isinstance(x, np.float32) else np.tanh(x)


def sigmoid(x):
    """Logistic function in the precision of ``x`` (float32: sigmoid32; float64: NumPy's when Numba's
    JIT is disabled)."""
    return sigmoid32(x) if isinstance(x, np.float32) else 1 / (1 + np.exp(-x))


@overload(tanh, inline="always")
def _tanh_impl(x):
    if x == types.float32:
        return lambda x: tanh32(x)
    return lambda x: math.tanh(x)


@overload(sigmoid, inline="always")
def _sigmoid_impl(x):
    if x == types.float32:
        return lambda x: sigmoid32(x)
    return lambda x: 1.0 / (1.0 + math.exp(-x))


@kernel()
def activate(v, lo, hi, code):
    """Apply activation ``code`` to v[lo:hi] in place; one loop per code so that each vectorises."""
    if code == SIGMOID:
        for j in range(lo, hi):
            store(v, j, sigmoid(load(v, j)))
    elif code == TANH:
        for j in range(lo, hi):
            store(v, j, tanh(load(v, j)))
    else:
        for j in range(lo, hi):
            # relu, written so that NaN stays NaN (NaN < 0 is False).
            x = load(v, j)
            store(v, j, 0 if x < 0 else x)


@kernel()
def clip(v, lo, hi, c):
    """Clamp v[lo:hi] to [-c, c] in place (the gate pre-activations' clip); NaN passes through."""
    for j in range(lo, hi):
        x = load(v, j)
        x = c if x > c else x
        store(v, j, -c if x < -c else x)
