"""fastgru.dask on a real distributed.LocalCluster of two worker processes: the same bits as one
NumPy call on the whole batch, the weights once per graph, a killed worker retried, and errors
raised when the graph is built."""

import logging
import math
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import cloudpickle  # noqa: E402 - after the skip: distributed depends on it
import dask  # noqa: E402
import dask.array as da  # noqa: E402

import fastgru  # noqa: E402
import fastgru.dask  # noqa: E402
from fastgru import FastGRUError  # noqa: E402

#: Seconds any one cluster operation may take before the test fails instead of hanging CI: a
#: ceiling, not a wait. Generous, since a restarted worker may compile the kernels afresh while
#: the other compiles too (cold cache, two cores): a CI run once took over 60 s there.
TIMEOUT = 300

DASK_PAGE = Path(__file__).resolve().parent.parent / "docs" / "guide" / "dask.md"


@pytest.fixture(scope="module")
def client():
    # Compile (or load) the kernels in this process first: the workers then load them from the disk
    # cache instead of each compiling them at once.
    fastgru.warmup(dtypes=["float32", "float64"], ops=["gru_sequence", "augru_sequence"])
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
        timeout=TIMEOUT,
    )
    client = distributed.Client(cluster, timeout=TIMEOUT)
    try:
        yield client
    finally:
        client.close(timeout=TIMEOUT)
        cluster.close(timeout=TIMEOUT)


def _case(rng, n, d, *, S=6, I=5, H=7, dtype=np.float32, lbr=False, augru=None):
    """Inputs (X, H0, lengths[, A]) with ragged lengths, and weights; augru is None, "2d" or "3d"."""
    gates = 4 if lbr else 3
    X = rng.standard_normal((n, S, I)).astype(dtype)
    lengths = rng.integers(0, S + 1, n).astype(np.int32)
    if augru == "2d":
        shapes = ((n, H), (3 * H, I), (3 * H, H), (3 * H,))
    else:
        shapes = ((n, d, H), (d, 3 * H, I), (d, 3 * H, H), (d, gates * H))
    h0, W, R, B = (rng.uniform(-0.5, 0.5, shape).astype(dtype) for shape in shapes)
    inputs = (X, h0, lengths) if augru is None else (X, h0, lengths, rng.uniform(size=(n, S, 1)).astype(dtype))
    return types.SimpleNamespace(inputs=inputs, weights=(W, R, B))


def _chunked(inputs, batch_chunks):
    """X chunked along every axis (rechunked whole by fastgru.dask), the others differently along the batch."""
    X, h0, lengths, *A = inputs
    arrays = [
        da.from_array(X, chunks=(batch_chunks, 4, 3)),
        da.from_array(h0, chunks=4),
        da.from_array(lengths, chunks=5),
    ]
    return arrays + [da.from_array(a, chunks=(3, 2, 1)) for a in A]


def _compute(client, *arrays):
    futures = client.compute(list(arrays))
    distributed.wait(futures, timeout=TIMEOUT)
    return [future.result() for future in futures]


def _assert_same_bits(got, want):
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


#: Batch chunks of 20 rows: uneven, one empty, one of a single row.
CHUNKS = (7, 0, 1, 12)

SEQUENCE_CASES = {
    "forward": ({"direction": "forward"}, np.float32),
    "bidirectional-lbr-clip": (
        {"direction": "bidirectional", "linear_before_reset": True, "clip": 1.5, "activations": ("tanh", "relu")},
        np.float64,
    ),
    "reverse-float16": ({"direction": "reverse"}, np.float16),
}


@pytest.mark.parametrize("name", SEQUENCE_CASES)
def test_gru_sequence_same_bits_as_one_numpy_call(client, name):
    attrs, dtype = SEQUENCE_CASES[name]
    d = 2 if attrs["direction"] == "bidirectional" else 1
    case = _case(np.random.default_rng(1), sum(CHUNKS), d, dtype=dtype, lbr=attrs.get("linear_before_reset", False))
    want = fastgru.gru_sequence(*case.inputs, *case.weights, **attrs)
    Y, Ho = fastgru.dask.gru_sequence(*_chunked(case.inputs, CHUNKS), *case.weights, **attrs)
    assert Y.chunks == (CHUNKS, (d,), (6,), (7,)) and Ho.chunks == (CHUNKS, (d,), (7,))
    assert Y.dtype == Ho.dtype == dtype
    _assert_same_bits(_compute(client, Y, Ho), want)
    op = fastgru.dask.GRUSequence(*case.weights, **attrs)
    _assert_same_bits(_compute(client, *op(*_chunked(case.inputs, CHUNKS))), want)


@pytest.mark.parametrize("layout", ["2d", "3d"])
def test_augru_sequence_same_bits_as_one_numpy_call(client, layout):
    case = _case(np.random.default_rng(2), sum(CHUNKS), 1, augru=layout)
    want = fastgru.augru_sequence(*case.inputs[:3], *case.weights, case.inputs[3])
    X, h0, lengths, A = _chunked(case.inputs, CHUNKS)
    Y, Ho = fastgru.dask.augru_sequence(X, h0, lengths, *case.weights, A)
    assert Y.chunks[0] == Ho.chunks[0] == CHUNKS and Y.shape == want[0].shape and Ho.shape == want[1].shape
    _assert_same_bits(_compute(client, Y, Ho), want)
    op = fastgru.dask.AUGRUSequence(*case.weights)
    _assert_same_bits(_compute(client, *op(X, h0, lengths, A)), want)


def test_each_worker_process_builds_the_prepared_op_once(client):
    case = _case(np.random.default_rng(3), 40, 1)
    op = fastgru.dask.GRUSequence(*case.weights)
    arrays = _chunked(case.inputs, 4)  # 10 chunks
    _compute(client, *op(*arrays))
    _compute(client, *op(*arrays))  # a second graph of the same op reuses the workers' ops
    token = op._node.key.removeprefix("fastgru-weights-")
    built = client.run(lambda: fastgru.dask._built.get(token, 0))
    assert set(built.values()) <= {0, 1} and sum(built.values()) >= 1


def test_the_graph_holds_the_weights_once(client):
    case = _case(np.random.default_rng(4), 30, 2, H=16, dtype=np.float64)
    W = case.weights[0]
    op = fastgru.dask.GRUSequence(*case.weights, direction="bidirectional")
    Y, Ho = op(*_chunked(case.inputs, 3))  # 10 chunks
    Y2, _ = op(*_chunked(case.inputs, 5))  # another graph of the same op: the same weights key

    def holders(graph):
        # Serialised as the scheduler receives them: which tasks or data carry W's bytes.
        return [key for key, value in dict(graph).items() if W.tobytes() in cloudpickle.dumps(value)]

    assert len(Y.chunks[0]) == 10
    assert holders(Y.__dask_graph__()) == [op._node.key]
    (optimized,) = dask.optimize(dask.delayed([Y, Ho, Y2]))
    assert holders(optimized.__dask_graph__()) == [op._node.key]
    _assert_same_bits(
        _compute(client, Y, Ho), fastgru.gru_sequence(*case.inputs, *case.weights, direction="bidirectional")
    )


def test_a_worker_killed_during_the_computation_is_retried(client, tmp_path):
    case = _case(np.random.default_rng(5), 24, 1, S=30, H=32)
    want = fastgru.gru_sequence(*case.inputs, *case.weights)
    marker = str(tmp_path / "killed")

    def kill_once(block, block_info=None):
        # The first time block 2 runs, its worker process dies; Dask reruns it, and whatever that worker held.
        import os

        if block_info[0]["chunk-location"][0] == 2 and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return block

    Y, Ho = fastgru.dask.gru_sequence(*_chunked(case.inputs, 4), *case.weights)
    Y = Y.map_blocks(kill_once, dtype=Y.dtype)
    for attempt in range(2):
        # Dask has hung, rarely, after the kill: both workers idle, the lost tasks never scheduled
        # again (a CI rehearsal, 2026-11-25). Then once more, with the kill, on a restarted cluster.
        Path(marker).unlink(missing_ok=True)
        try:
            got = _compute(client, Y, Ho)
            break
        except TimeoutError:
            if attempt:
                raise
            client.restart()
    assert Path(marker).exists()
    _assert_same_bits(got, want)
    client.wait_for_workers(2, timeout=TIMEOUT)


def test_a_bad_sequence_length_raises_on_compute_naming_its_row(client):
    case = _case(np.random.default_rng(6), 20, 1)
    X, h0, lengths = case.inputs
    lengths[13] = 9
    Y, Ho = fastgru.dask.gru_sequence(*_chunked((X, h0, lengths), (7, 6, 7)), *case.weights)  # checks pass
    with pytest.raises(
        FastGRUError,
        match=re.escape("gru_sequence: sequence_lengths[13] is 9; expected 0 <= sequence_lengths <= seq_length=6"),
    ):
        _compute(client, Ho)


def test_threads_per_task_follow_the_worker_threads(client):
    assert client.submit(fastgru.dask.threads_per_task, pure=False).result(timeout=TIMEOUT) == 1
    client.run(lambda: dask.config.set({"fastgru.worker-cores": 2}))
    try:
        got = client.submit(fastgru.dask.threads_per_task, pure=False).result(timeout=TIMEOUT)
    finally:
        client.run(lambda: dask.config.set({"fastgru.worker-cores": None}))
    assert got == min(2, fastgru._threading.BUDGET)
    with dask.config.set(num_workers=1):  # the threaded scheduler, outside a worker: all cores to its one task
        assert fastgru.dask.threads_per_task() == min(dask.system.CPU_COUNT, fastgru._threading.BUDGET)


# ----------------------------------------------------------------------- without a cluster


def test_import_fastgru_does_not_import_dask():
    code = "import sys, fastgru; print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_outputs_in_the_threaded_scheduler_and_an_empty_batch():
    case = _case(np.random.default_rng(7), 9, 1)
    _assert_same_bits(
        dask.compute(*fastgru.dask.gru_sequence(*_chunked(case.inputs, 4), *case.weights)),
        fastgru.gru_sequence(*case.inputs, *case.weights),
    )
    empty = tuple(a[:0] for a in case.inputs)
    Y, Ho = fastgru.dask.gru_sequence(*(da.from_array(a) for a in empty), *case.weights)
    assert Y.chunks == ((0,), (1,), (6,), (7,))
    _assert_same_bits(dask.compute(Y, Ho), fastgru.gru_sequence(*empty, *case.weights))


def _errors_case():
    case = _case(np.random.default_rng(8), 10, 1)
    return [da.from_array(a, chunks=4) for a in case.inputs], case.weights


def test_a_wrong_weight_shape_fails_when_the_graph_is_built():
    (X, h0, lengths), (W, R, B) = _errors_case()
    with pytest.raises(
        FastGRUError,
        match=re.escape(
            "gru_sequence: W has shape (1, 21, 4); expected (num_directions=1, 3*hidden_size=21, input_size=5)"
        ),
    ):
        fastgru.dask.gru_sequence(X, h0, lengths, W[:, :, :4], R, B)
    with pytest.raises(FastGRUError, match="GRUSequence: direction is 'sideways'"):
        fastgru.dask.GRUSequence(W, R, B, direction="sideways")


def test_wrong_inputs_fail_when_the_graph_is_built():
    (X, h0, lengths), (W, R, B) = _errors_case()
    with pytest.raises(TypeError, match=re.escape("gru_sequence: X is int64; expected float16")):
        fastgru.dask.gru_sequence(X.astype(np.int64), h0, lengths, W, R, B)
    with pytest.raises(TypeError, match="gru_sequence: sequence_lengths is float32; expected an integer dtype"):
        fastgru.dask.gru_sequence(X, h0, lengths.astype(np.float32), W, R, B)
    with pytest.raises(
        FastGRUError,
        match=re.escape("gru_sequence: initial_hidden_state has shape (9, 1, 7); expected (batch_size=10,"),
    ):
        fastgru.dask.gru_sequence(X, h0[:9], lengths, W, R, B)
    op = fastgru.dask.GRUSequence(W, R, B)
    with pytest.raises(
        FastGRUError,
        match=re.escape("GRUSequence: X has shape (10, 6, 4); expected (batch_size=10, seq_length=6, input_size=5)"),
    ):
        op(X[:, :, :4], h0, lengths)
    with pytest.raises(FastGRUError, match="augru_sequence: initial_hidden_state has rank 1"):
        fastgru.dask.augru_sequence(X, h0[:, 0, 0], lengths, W, R, B, X[:, :, :1])


def test_dask_weights_and_unknown_chunks_are_refused():
    (X, h0, lengths), (W, R, B) = _errors_case()
    with pytest.raises(TypeError, match=re.escape("gru_sequence: W is a dask collection; expected a NumPy array")):
        fastgru.dask.gru_sequence(X, h0, lengths, da.from_array(W), R, B)
    unknown = X[X[:, 0, 0] > 0]
    with pytest.raises(
        FastGRUError,
        match=re.escape(
            "gru_sequence: X has unknown chunk sizes (shape (nan, 6, 5)); "
            "expected known ones. Call X.compute_chunk_sizes() first."
        ),
    ):
        fastgru.dask.gru_sequence(unknown, h0, lengths, W, R, B)


def test_a_batch_chunk_over_max_chunk_bytes_is_refused():
    (X, h0, lengths), (W, R, B) = _errors_case()
    row = (6 * 5 + 7 + 6 * 7 + 7) * 4 + 4  # X, initial_hidden_state, Y, Ho in float32; sequence_lengths int32
    fastgru.dask.gru_sequence(X, h0, lengths, W, R, B, max_chunk_bytes=4 * row)  # chunks of 4 rows fit
    with pytest.raises(
        FastGRUError,
        match=re.escape(f"gru_sequence: a batch chunk of 4 rows takes {4 * row} bytes")
        + ".*"
        + re.escape("Use at most 3 rows per chunk: X.rechunk({0: 3})."),
    ):
        fastgru.dask.gru_sequence(X, h0, lengths, W, R, B, max_chunk_bytes=4 * row - 1)


# ----------------------------------------------------------------------------------- the guide's page


def _dask_page_blocks():
    return re.findall(r"```python\n(.*?)```", DASK_PAGE.read_text(), flags=re.S)


# The example's cluster serves its dashboard on Dask's default port; distributed warns and takes
# another one when that port is taken (by another cluster on the machine).
@pytest.mark.filterwarnings("ignore:Port 8787 is already in use:UserWarning")
def test_the_dask_examples_run_on_a_local_cluster():
    local, remote = _dask_page_blocks()
    namespace = {"__name__": "__main__"}
    exec(compile(local, str(DASK_PAGE), "exec"), namespace)  # noqa: S102 - the documentation's own example
    Ho = namespace["Ho"]
    assert isinstance(Ho, np.ndarray) and Ho.shape == (4096, 1, 128) and not np.isnan(Ho).any()
    # The path to a real cluster: the same function, with a Client of the cluster's scheduler.
    compile(remote, str(DASK_PAGE), "exec")
    assert 'Client("tcp://scheduler:8786")' in remote and "score(client)" in remote


def test_the_weights_key_is_the_token_of_the_weights_and_attributes():
    (X, h0, lengths), (W, R, B) = _errors_case()
    keys = [
        fastgru.dask.GRUSequence(W, R, B, **attrs)._node.key
        for attrs in ({}, {"clip": math.inf}, {"clip": 1.0}, {"activations": ("tanh", "tanh")})
    ]
    assert keys[0] == keys[1] and len(set(keys)) == 3
