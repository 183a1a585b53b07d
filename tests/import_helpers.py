"""Shared by tests/test_import_*.py: compare fastgru with a source runtime and keep the largest
deviation seen per runtime, printed after each module (shown even without -s)."""

import os
from collections import defaultdict

import numpy as np
import pytest
from conftest import TOLERANCES, show_lines


class Deviations:
    """The largest |fastgru - runtime| per label, and the comparison that records it."""

    def __init__(self, title):
        self.title = title
        self.worst = defaultdict(float)
        self.where = {}

    def check(self, label, got, want):
        """Assert that the arrays of ``got`` match those of ``want`` (same shapes, dtypes, NaN-free)
        within the tolerance of their dtype in conftest.TOLERANCES (float32's also covers runtimes
        with their own tanh/sigmoid and summation order); record the largest absolute difference
        under ``label``."""
        assert len(got) == len(want), (len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            g, w = np.asarray(g), np.asarray(w)
            assert g.shape == w.shape, f"{label} result {i}: shape {g.shape}, expected {w.shape}"
            assert g.dtype == w.dtype, f"{label} result {i}: dtype {g.dtype}, expected {w.dtype}"
            rtol, atol = TOLERANCES[w.dtype.name]
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            assert np.all(np.isfinite(w64)), f"{label} result {i}: the runtime returned a non-finite value"
            np.testing.assert_allclose(g64, w64, rtol=rtol, atol=atol, err_msg=f"{label} result {i}")
            if g.size:
                worst = float(np.max(np.abs(g64 - w64)))
                if worst > self.worst.get(label, -1.0):  # the first check of a label is kept even when exact
                    self.worst[label] = worst
                    self.where[label] = (worst, float(np.max(np.abs(w64))), os.environ.get("PYTEST_CURRENT_TEST"))

    def fixture(self):
        """A module-scoped autouse fixture that prints the summary after the module's tests."""

        @pytest.fixture(scope="module", autouse=True)
        def deviation_summary(request):
            yield
            if not self.worst:
                return
            lines = ["", f"{self.title}, max |difference|:"]
            lines += [
                f"  {key:<24} {value:.3g}  in {self.where[key][2].split('::')[-1].split(' ')[0]} "
                f"(largest |value| {self.where[key][1]:.3g})"
                for key, value in sorted(self.worst.items())
            ]
            show_lines(request, lines)

        return deviation_summary


def uniform(rng, shape, scale, dtype=np.float32):
    return rng.uniform(-scale, scale, shape).astype(dtype)
