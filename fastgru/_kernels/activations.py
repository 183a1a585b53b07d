"""Gate activations for the kernels: relu, sigmoid and tanh, selected by integer code.

float32 uses a branch-free rational approximation of tanh that LLVM vectorises (libm's
``tanhf`` is a scalar call of ~10 ns; this is ~0.3 ns and within 1e-6 of tanh). float64
uses libm, which is exact to the last bit or so. Every function keeps NaN: comparisons with
NaN are false, so each clamp below is written to leave a NaN operand untouched.
"""

import math

import numpy as np
from numba import types
from numba.extending import overload

from .._config import kernel
from .memory import load, store

RELU, SIGMOID, TANH = 0, 1, 2
CODES = {"relu": RELU, "sigmoid": SIGMOID, "tanh": TANH}

# Rational minimax approximation of tanh on [-c, c] (the form Eigen uses for float):
# tanh(x) ~ x * P(x^2) / Q(x^2), saturated to +-1 beyond c.
_CLAMP = np.float32(7.90531110763549805)
_A1 = np.float32(4.89352455891786e-03)
_A3 = np.float32(6.37261928875436e-04)
_A5 = np.float32(1.48572235717979e-05)
_A7 = np.float32(5.12229709037114e-08)
_A9 = np.float32(-8.60467152213735e-11)
_A11 = np.float32(2.00018790482477e-13)
_A13 = np.float32(-2.76076847742355e-16)
_B0 = np.float32(4.89352518554385e-03)
_B2 = np.float32(2.26843463243900e-03)
_B4 = np.float32(1.18534705686654e-04)
_B6 = np.float32(1.19825839466702e-06)
_HALF32 = np.float32(0.5)


def tanh(x):
    """tanh in the precision of ``x`` (NumPy's when Numba's JIT is disabled)."""
    return np.tanh(x)


def sigmoid(x):
    """Logistic function in the precision of ``x`` (NumPy's when the JIT is disabled)."""
    return 1 / (1 + np.exp(-x))


@overload(tanh, inline="always")
def _tanh_impl(x):
    if x == types.float32:

        def tanh32(x):
            # Clamp without min/max so that a NaN passes through (x > c is False for NaN).
            x = _CLAMP if x > _CLAMP else x
            x = -_CLAMP if x < -_CLAMP else x
            x2 = x * x
            p = x2 * _A13 + _A11
            p = x2 * p + _A9
            p = x2 * p + _A7
            p = x2 * p + _A5
            p = x2 * p + _A3
            p = x2 * p + _A1
            p = x * p
            q = x2 * _B6 + _B4
            q = x2 * q + _B2
            q = x2 * q + _B0
            return p / q

        return tanh32
    return lambda x: math.tanh(x)


@overload(sigmoid, inline="always")
def _sigmoid_impl(x):
    if x == types.float32:
        # sigmoid(x) = 0.5 * tanh(x / 2) + 0.5 keeps the vectorisable tanh above.
        return lambda x: _HALF32 * tanh(_HALF32 * x) + _HALF32
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
    """Clamp v[lo:hi] to [-c, c] in place (docs/semantics.md, "The gates"); NaN passes through."""
    for j in range(lo, hi):
        x = load(v, j)
        x = c if x > c else x
        store(v, j, -c if x < -c else x)
