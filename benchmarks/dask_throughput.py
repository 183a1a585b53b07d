"""Sequences per second of fastgru.dask on a distributed.LocalCluster against one in-process call.

Run alone (it uses every core), e.g. ``flock /tmp/fastgru-bench.lock python benchmarks/dask_throughput.py``.

Shapes default to the issue's: a batch of 4096 sequences in chunks of 512, 50 steps, input_size 64,
hidden_size 128, float32, ragged lengths, forward. Measured, as medians over rounds:

- ``in-process``: one call of a prepared ``fastgru.GRUSequence`` on the whole batch, on all cores
  (Numba's default thread count);
- ``in-process, 1 thread, chunk by chunk``: what the tasks compute, for comparison with their times;
- ``threaded scheduler``: ``fastgru.dask`` without a client, in this process (one fastgru thread
  per task, as many tasks at once as cores);
- ``LocalCluster, data on the workers``: inputs persisted on the workers beforehand and outputs left
  there (``client.persist``), as when workers read and write the data themselves;
- ``LocalCluster, NumPy in and out``: inputs sent from this process and Y and Ho gathered back.

Where the cluster's time goes comes from Dask's task stream: graph build (on the client), the wait
for the first task, the fastgru tasks' compute time on each worker (their sum over the busiest
worker is the floor of the wall time), transfers between processes, and the rest (scheduling gaps
between tasks, serialisation, the gather).
"""

import argparse
import statistics
import time
import warnings

import dask
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster, get_task_stream, wait

import fastgru
import fastgru.dask


def _median_time(run, rounds):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _breakdown(records, submitted, finished):
    """From the task stream: submit to the first task's start, the tasks' span (first start to last stop),
    last stop to the client's return, and per worker the fastgru compute, other compute and transfers (seconds)."""
    workers = {}
    steps = [s for r in records for s in r["startstops"]]
    first, last = min(s["start"] for s in steps), max(s["stop"] for s in steps)
    for record in records:
        name = record["key"][0] if isinstance(record["key"], tuple) else record["key"]
        w = workers.setdefault(record["worker"], {"fastgru": 0.0, "other": 0.0, "transfer": 0.0, "tasks": 0})
        for step in record["startstops"]:
            span = step["stop"] - step["start"]
            if step["action"] == "compute":
                w["fastgru" if name.startswith("fastgru-GRUSequence") else "other"] += span
                w["tasks"] += name.startswith("fastgru-GRUSequence")
            else:
                w["transfer"] += span
    return first - submitted, last - first, finished - last, workers


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--chunk", type=int, default=512)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--inputs", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    N, C, S, I, H = args.batch, args.chunk, args.steps, args.inputs, args.hidden

    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, S, I), dtype=np.float32)
    H0 = np.zeros((N, 1, H), dtype=np.float32)
    L = rng.integers(S // 2, S + 1, N)
    W = rng.uniform(-0.1, 0.1, (1, 3 * H, I)).astype(np.float32)
    R = rng.uniform(-0.1, 0.1, (1, 3 * H, H)).astype(np.float32)
    B = np.zeros((1, 3 * H), dtype=np.float32)
    flops = 2 * int(L.sum()) * 3 * H * (I + H)
    rows = []

    def report(name, seconds, note=""):
        rows.append((name, seconds, N / seconds, flops / seconds / 1e9, note))

    op = fastgru.GRUSequence(W, R, B)
    want = op(X, H0, L)
    report(
        f"in-process, one call, {fastgru.get_num_threads()} threads", _median_time(lambda: op(X, H0, L), args.rounds)
    )
    with fastgru.threads(1):  # what the tasks compute: each chunk in turn, on one thread
        chunks = _median_time(
            lambda: [op(X[i : i + C], H0[i : i + C], L[i : i + C]) for i in range(0, N, C)], args.rounds
        )
    report(
        "in-process, 1 thread, chunk by chunk",
        chunks,
        f"{chunks * C / N * 1e3:.1f} ms per chunk; / {args.workers} workers = {chunks / args.workers:.3f} s",
    )

    # The NumPy inputs of the last run travel inside the graph (52 MB at the default shapes), which
    # distributed warns about; that run measures this very cost.
    warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
    dop = fastgru.dask.GRUSequence(W, R, B)
    arrays = (da.from_array(X, chunks=(C, S, I)), da.from_array(H0, chunks=(C, 1, H)), da.from_array(L, chunks=C))
    got = dask.compute(*dop(*arrays))
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    report(
        "threaded scheduler, in-process",
        _median_time(lambda: dask.compute(*dop(*arrays)), args.rounds),
        f"{dask.system.CPU_COUNT} tasks at once, 1 fastgru thread each",
    )

    with (
        LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        placed = client.persist(arrays)
        wait(placed)
        wait(client.persist(dop(*placed)))  # warm: workers load the kernels and build the op

        stages = []

        def on_workers():
            start = time.perf_counter()
            Y, Ho = dop(*placed)
            build = time.perf_counter() - start
            with get_task_stream(client) as stream:
                submitted = time.time()
                wait(client.persist([Y, Ho]))
            stages.append((build, time.perf_counter() - start, *_breakdown(stream.data, submitted, time.time())))

        report(
            "LocalCluster, data on the workers",
            _median_time(on_workers, args.rounds),
            f"{args.workers} workers x 1 thread, persist",
        )
        build, wall, to_first, span, to_return, workers = sorted(stages, key=lambda s: s[1])[len(stages) // 2]

        gathered = []

        def numpy_in_out():
            arrays = (
                da.from_array(X, chunks=(C, S, I)),
                da.from_array(H0, chunks=(C, 1, H)),
                da.from_array(L, chunks=C),
            )
            gathered[:] = [client.compute(list(dop(*arrays)), sync=True)]

        report(
            "LocalCluster, NumPy in and out",
            _median_time(numpy_in_out, args.rounds),
            f"{X.nbytes / 1e6:.0f} MB in, {want[0].nbytes / 1e6:.0f} MB out",
        )
        assert all(np.array_equal(g, w) for g, w in zip(gathered[-1], want))

    print(
        f"fastgru.dask throughput: batch {N} in chunks of {C}, seq_length {S}, input_size {I}, hidden_size {H}, "
        f"float32, forward; {flops / 1e9:.1f} GFLOP; medians of {args.rounds} rounds; cores {dask.system.CPU_COUNT}"
    )
    print()
    print("| run | s | sequences/s | GFLOP/s | note |")
    print("|---|---|---|---|---|")
    for name, seconds, rate, gflops, note in rows:
        print(f"| {name} | {seconds:.3f} | {rate:,.0f} | {gflops:.1f} | {note} |")
    print()
    print(f"LocalCluster, data on the workers, the median round ({wall * 1e3:.1f} ms):")
    print(
        f"  graph build on the client {build * 1e3:.1f} ms, submit to the first task's start "
        f"{to_first * 1e3:.1f} ms, tasks (first start to last stop) {span * 1e3:.1f} ms, "
        f"last stop to the client's return {to_return * 1e3:.1f} ms"
    )
    for address, w in sorted(workers.items()):
        print(
            f"  worker {address}: {w['tasks']} fastgru tasks computing {w['fastgru']:.3f} s "
            f"({w['fastgru'] / max(w['tasks'], 1) * 1e3:.1f} ms each), other tasks {w['other'] * 1e3:.1f} ms, "
            f"transfers {w['transfer'] * 1e3:.1f} ms"
        )


if __name__ == "__main__":
    main()
