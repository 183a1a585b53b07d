"""Numba kernels: ``@njit`` code only, trusting every argument it is given."""
