"""Steps per second of a state pool against one call per stream (issue 14, "Many streams").

    flock -x /tmp/fastgru-cpu.lock python benchmarks/pool.py        # about 1-2 minutes; run nothing else

A tick advances each of ``n`` live streams by one step of a GRU cell (input_size 256, hidden_size
256, float32, linear_before_reset False), as a keyword spotter or a speech enhancer does per audio
frame, from a pool of 1024 open streams (the ``n`` are a random subset, in random order). Per
tick, timed:

- ``pool``: one ``pool.step(ids, X, out=H)`` for the n streams (``fastgru.StatePool``);
- ``per_stream``: n calls ``cell(x_i, h_i, out=h_i)`` of a prepared ``fastgru.GRUCell``, one per
  stream, each on its own state;
- ``gather_scatter``: the batch made by hand: the n states gathered into a (n, H) buffer
  (``np.take``), one ``cell(X, h, out=h)``, scattered back; the pool's step without the copies;
- ``onnxruntime``: n batch-1 calls of one ONNX Runtime session of an ONNX GRU node with the same
  weights (``intra_op_num_threads=2``; IOBinding with every input and output bound once to
  preallocated arrays, ``sequence_lens`` an input; each stream's state fed back as ``initial_h``
  through two bindings per stream that swap its two state buffers every tick).

Each (n, implementation) runs 5 rounds, interleaved over every n and implementation; a round is
two untimed ticks, then ticks for 0.1 s (at least 3); steps per second is n over the median tick.
The report gives the median over the rounds, and ratios of medians from this one run. Results go
to ``benchmarks/results/<cpu>/pool_results.json`` and ``.md`` and the chart to ``pool_results.png``
beside them (``conftest.results_dir``).
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from conftest import machine_info, results_dir  # noqa: E402  (benchmarks/conftest.py: also imports openvino first, for TBB)
from peers import THREADS  # noqa: E402

import fastgru  # noqa: E402

I = H = 256
CAPACITY = 1024
IMPLS = ("pool", "per_stream", "gather_scatter", "onnxruntime")
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Streams:
    """The weights, the pool's 1024 streams and each implementation's copy of their states."""

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        scale = 1 / np.sqrt(H)
        self.W = rng.uniform(-scale, scale, (3 * H, I)).astype(np.float32)
        self.R = rng.uniform(-scale, scale, (3 * H, H)).astype(np.float32)
        self.B = rng.uniform(-scale, scale, 3 * H).astype(np.float32)
        self.h0 = (rng.standard_normal((CAPACITY, H)) * 0.5).astype(np.float32)
        self.X = rng.standard_normal((CAPACITY, I)).astype(np.float32)
        self.order = rng.permutation(CAPACITY)  # the first n are the live streams of a tick of n
        self.cell = fastgru.GRUCell(self.W, self.R, self.B)
        self.pool = fastgru.StatePool(self.cell, CAPACITY)
        for h in self.h0:
            self.pool.open(h)
        self.states = self.h0.copy()  # per_stream and gather_scatter: one (1, H) row per stream


def builders(streams):
    """{impl: make(n) -> tick()}: each tick advances the n live streams by one step."""
    c = streams

    def pool(n):
        ids, X, out = c.order[:n].copy(), c.X[:n].copy(), np.empty((n, H), np.float32)
        return lambda: c.pool.step(ids, X, out=out)

    def per_stream(n):
        calls = [(c.X[k : k + 1].copy(), c.states[i : i + 1]) for k, i in enumerate(c.order[:n])]
        cell = c.cell

        def tick():
            for x, h in calls:
                cell(x, h, out=h)

        return tick

    def gather_scatter(n):
        ids, X, h = c.order[:n].copy(), c.X[:n].copy(), np.empty((n, H), np.float32)

        def tick():
            np.take(c.states, ids, axis=0, out=h)
            c.cell(X, h, out=h)
            c.states[ids] = h

        return tick

    impls = {"pool": pool, "per_stream": per_stream, "gather_scatter": gather_scatter}
    session = _onnxruntime_session(c)
    if session is not None:
        impls["onnxruntime"] = lambda n: _onnxruntime_tick(session, c, n)
    return impls


def _onnxruntime_session(c):
    """One ONNX Runtime session of a GRU node (X (1, 1, I), sequence_lens and initial_h as inputs,
    Y_h the only output), or None without onnxruntime."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    # ONNX's B is [Wb | Rb]: OpenVINO's summed biases go in Wb (linear_before_reset False).
    bias = np.concatenate([c.B, np.zeros_like(c.B)])[None]
    initializers = [
        numpy_helper.from_array(c.W[None], "W"),
        numpy_helper.from_array(c.R[None], "R"),
        numpy_helper.from_array(bias, "B"),
    ]
    node = helper.make_node("GRU", ["X", "W", "R", "B", "sequence_lens", "initial_h"], ["", "Y_h"], hidden_size=H)
    graph = helper.make_graph(
        [node],
        "gru",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, I]),
            helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [1]),
            helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, [1, 1, H]),
        ],
        [helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, 1, H])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _onnxruntime_tick(session, c, n):
    """A tick of n batch-1 runs; stream k's state lives in buffers[k, parity], and the run reads one
    and writes the other, so that each tick feeds back the previous one's Y_h."""
    lengths = np.ones(1, np.int32)
    xs = [np.ascontiguousarray(c.X[k : k + 1, None]) for k in range(n)]
    buffers = np.empty((n, 2, 1, 1, H), np.float32)
    buffers[:, 0, 0, 0] = c.h0[c.order[:n]]
    bindings = []
    for k in range(n):
        pair = []
        for parity in (0, 1):
            binding = session.io_binding()
            binding.bind_cpu_input("X", xs[k])
            binding.bind_cpu_input("sequence_lens", lengths)
            binding.bind_cpu_input("initial_h", buffers[k, parity])
            out = buffers[k, 1 - parity]
            binding.bind_output("Y_h", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
            pair.append(binding)
        bindings.append(pair)
    parity = [0]
    run = session.run_with_iobinding

    def tick():
        p = parity[0]
        for pair in bindings:
            run(pair[p])
        parity[0] = 1 - p

    tick.states = lambda: buffers[np.arange(n), parity[0], 0, 0]
    return tick


def check(streams, impls):
    """Three ticks of 8 streams from the same states: the same states (bits among fastgru's, 1e-5
    against ONNX Runtime). Outside the timing; the states are then set back."""
    n = 8
    ids = streams.order[:n]
    got = {}
    for name, make in impls.items():
        tick = make(n)
        for _ in range(3):
            tick()
        if name == "pool":
            got[name] = np.stack([streams.pool.state(i) for i in ids])
        elif name == "onnxruntime":
            got[name] = tick.states()
        else:
            got[name] = streams.states[ids].copy()
            streams.states[ids] = streams.h0[ids]
    for i in ids:
        streams.pool.reset(int(i), streams.h0[i])
    for name in ("per_stream", "gather_scatter"):
        assert np.array_equal(got[name], got["pool"]), name
    if "onnxruntime" in got:
        np.testing.assert_allclose(got["onnxruntime"], got["pool"], rtol=1e-5, atol=1e-5)


def measure(impls, sizes, rounds, seconds):
    """{impl: {n: [median tick seconds of each round]}}, rounds interleaved over every n and impl."""
    ticks = {name: {n: make(n) for n in sizes} for name, make in impls.items()}
    times = {name: {n: [] for n in sizes} for name in impls}
    for _ in range(rounds):
        for n in sizes:
            for name in impls:
                tick = ticks[name][n]
                tick(), tick()
                samples, end = [], time.perf_counter() + seconds
                while len(samples) < 3 or time.perf_counter() < end:
                    start = time.perf_counter()
                    tick()
                    samples.append(time.perf_counter() - start)
                times[name][n].append(statistics.median(samples))
    return times


def summarise(times):
    """{impl: {n: steps per second}} from the medians of the rounds' median ticks."""
    return {name: {n: n / statistics.median(rounds) for n, rounds in by_n.items()} for name, by_n in times.items()}


def table(rates, machine):
    sizes = sorted(next(iter(rates.values())))
    names = [name for name in IMPLS if name in rates]
    lines = [
        "| streams | "
        + " | ".join(f"{name} steps/s" for name in names)
        + " | pool / per_stream | pool / onnxruntime |",
        "|---" * (len(names) + 3) + "|",
    ]
    for n in sizes:
        row = [f"{rates[name][n]:,.0f}" for name in names]
        ratios = [
            f"{rates['pool'][n] / rates[other][n]:.1f}" if other in rates else "–"
            for other in ("per_stream", "onnxruntime")
        ]
        lines.append(f"| {n} | " + " | ".join(row + ratios) + " |")
    facts = ", ".join(f"{k} {v}" for k, v in machine.items())
    lines += [
        "",
        f"GRU cell i{I} h{H} float32, one step per stream per tick; medians of the rounds' median "
        f"ticks, ratios of those medians, in one run. Machine: {facts}.",
    ]
    return "\n".join(lines) + "\n"


def chart(rates, machine, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {
        "pool": "fastgru StatePool: one step call per tick",
        "per_stream": "fastgru GRUCell: one call per stream",
        "gather_scatter": "fastgru GRUCell on the gathered states, scattered back",
        "onnxruntime": "ONNX Runtime: one batch-1 run per stream (IOBinding)",
    }
    styles = {"pool": "o-", "per_stream": "s-", "gather_scatter": "^--", "onnxruntime": "d-"}
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for name in IMPLS:
        if name in rates:
            sizes = sorted(rates[name])
            ax.plot(sizes, [rates[name][n] for n in sizes], styles[name], label=labels[name], markersize=4)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("streams advanced per tick")
    ax.set_ylabel("stream steps per second")
    ax.set_title(
        f"GRU cell i{I} h{H} float32, {machine.get('numba_threads')} threads, "
        f"{machine.get('isa')} ({machine.get('cpu_name')})",
        fontsize=10,
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.1)
    parser.add_argument("--out", help="the .json and .md, no suffix (default benchmarks/results/<cpu>/pool_results)")
    parser.add_argument("--png", help="default: benchmarks/results/<cpu>/pool_results.png")
    args = parser.parse_args()
    args.out = args.out or str(results_dir() / "pool_results")
    args.png = args.png or args.out + ".png"
    sizes = [int(n) for n in args.sizes.split(",")]
    streams = Streams()
    impls = builders(streams)
    check(streams, impls)
    times = measure(impls, sizes, args.rounds, args.seconds)
    machine = {k: v for k, v in machine_info().items() if k not in ("OPENBLAS_CORETYPE",)}
    rates = summarise(times)
    Path(args.out + ".json").write_text(
        json.dumps(
            {
                "shape": {"op": "gru_cell", "inputs": I, "hidden": H, "dtype": "float32", "lbr": False},
                "rounds": args.rounds,
                "seconds_per_round": args.seconds,
                "machine": machine,
                "tick_seconds": {name: {str(n): t for n, t in by_n.items()} for name, by_n in times.items()},
            },
            indent=1,
        )
    )
    text = table(rates, machine)
    Path(args.out + ".md").write_text(text)
    chart(rates, machine, args.png)
    print(text)


if __name__ == "__main__":
    main()
