"""A pytest-benchmark recipe: your kernel and fastgru timed in one session, grouped by shape.

Copy this file next to your tests and point CANDIDATE at your function (or PREPARED at your
factory), then::

    pytest test_benchmark_candidate.py --benchmark-autosave          # a table per shape
    pytest test_benchmark_candidate.py --benchmark-compare           # the same, and against the last saved run

Every group is one shape of a fastgru suite and holds three rows: ``candidate``, ``fastgru_prepared``
(the prepared op called with ``out=``) and ``fastgru`` (the function), so each table, and each
``--benchmark-compare``, sets your kernel beside fastgru's on the same inputs. The candidate is
checked against fastgru on each shape before it is timed (``fastgru.benchmark.calls``): a kernel
whose results differ fails its test instead of being timed. ``BENCH_SUITE`` and ``BENCH_OP`` in the
environment choose the suite and the op (default ``latency-v1``, ``gru_sequence``).
"""

import os

import pytest

from fastgru import reference
from fastgru.benchmark import calls as checked_calls
from fastgru.benchmark import suite_shapes

OP = os.environ.get("BENCH_OP", "gru_sequence")
#: Your function, called as fastgru's function of OP is; here the NumPy reference, as an example
#: (yours: ``from my_package import my_gru_sequence as CANDIDATE``).
CANDIDATE = getattr(reference, OP)
#: Or a factory called with the weights and attributes, as fastgru.GRUSequence is; then CANDIDATE = None.
PREPARED = None
SHAPES = suite_shapes(os.environ.get("BENCH_SUITE", "latency-v1"), OP)
IMPLEMENTATIONS = ["candidate", "fastgru_prepared", "fastgru"]


@pytest.fixture(scope="module")
def built():
    """Per shape id, the checked calls of each implementation, each on its own copy of the inputs."""
    return {}


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.id)
def test_benchmark(benchmark, built, shape, impl):
    if shape.id not in built:  # set-up, compilation and the check outside the timer
        built[shape.id] = checked_calls(shape, CANDIDATE, prepared=PREPARED)
    run = built[shape.id][impl]
    benchmark.group = shape.id  # one table per shape: the candidate beside fastgru
    benchmark.extra_info.update(shape=shape.id, impl=impl, flops=shape.flops)
    run()  # warm: the other implementations ran in between
    benchmark(run)
