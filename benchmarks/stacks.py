"""The stack table: torch.nn.GRU stacks at batch 1, frame by frame and over a sequence, fastgru beside
ONNX Runtime and torch, in one process.

    python benchmarks/stacks.py [--rounds 11] [--json benchmarks/results/<cpu>/stacks_results.json]
                                [--md benchmarks/results/<cpu>/stacks_results.md] [--readme FILE]

Each stack is a torch.nn.GRU (torch's initialisation, batch_first, input_size 128) of 2 or 3
layers of hidden size 128, 256 or 512, float32, 2 threads for every runtime. Per stack and case
(``frame``: one step per call, the states carried; ``seq100``: 100 steps in one call):

- ``stack``: ``fastgru.GRUStack`` of ``fastgru.from_torch(gru)``'s layers, NumPy arrays,
  ``stack(x, state, None, out=(y, state))`` (states updated in place);
- ``stack bf16``: the same with ``from_torch(gru, weight_dtype="bfloat16")``'s layers: half the
  bytes of weights to read per frame;
- ``one by one``: the same layers called one after another with their ops (``out=``), the Y of one
  the X of the next: what a stack saves;
- ``ONNX Runtime``: one graph of the stack's GRU nodes (torch's weights, linear_before_reset=1),
  each layer's initial_h an input and its Y_h an output, IOBinding (inputs bound once, outputs to
  preallocated arrays);
- ``torch``: the nn.GRU under ``torch.inference_mode()``, and ``fastgru.torch.optimize`` of it.

Each round times every implementation of a row in turn (the order alternates) for ``--calls``
calls, after a pause of 20 ms (the threads the previous runtime left spinning fall asleep: torch's,
ONNX Runtime's and fastgru's partner all spin after a call, and on two cores they would take the
next one's cores) and three calls untimed; a row gives the median over the rounds of the per-call
means, and the ratios to ONNX Runtime and torch. Writes JSON and a markdown table, which
``--readme FILE`` puts between the markers ``<!-- stacks:start -->`` and ``<!-- stacks:end -->`` of
FILE.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import machine_info, results_dir  # noqa: E402  (also imports openvino first: Numba then picks TBB)
from peers import THREADS, onnxruntime_session  # noqa: E402
from report import replace_table  # noqa: E402

import fastgru  # noqa: E402
import fastgru.torch  # noqa: E402

INPUT = 128
STACKS = [(2, 128), (2, 256), (3, 256), (2, 512), (3, 512)]
CASES = {"frame": 1, "seq100": 100}


def _torch_gru(layers, hidden):
    import torch

    torch.manual_seed(layers * 1000 + hidden)
    return torch.nn.GRU(INPUT, hidden, num_layers=layers, batch_first=True).eval()


def _onnx_stack(gru, steps):
    """An ONNX Runtime session of gru's layers as chained GRU nodes (layout 0), and its IOBinding run."""
    import torch
    from onnx import TensorProto, helper, numpy_helper

    h = gru.hidden_size
    state = {k: v.detach().numpy() for k, v in gru.state_dict().items()}

    def zrh(a):  # torch's gate blocks r, z, n -> ONNX's z, r, h
        r, z, n = np.split(a, 3, axis=0)
        return np.concatenate([z, r, n], axis=0)[None]

    nodes, initializers, inputs, outputs = [], [], [], []
    x_name = "X"
    inputs.append(helper.make_tensor_value_info("X", TensorProto.FLOAT, [steps, 1, INPUT]))
    for k in range(gru.num_layers):
        w, r = zrh(state[f"weight_ih_l{k}"]), zrh(state[f"weight_hh_l{k}"])
        b = np.concatenate([zrh(state[f"bias_ih_l{k}"]), zrh(state[f"bias_hh_l{k}"])], axis=1)
        initializers += [numpy_helper.from_array(a, f"{n}{k}") for a, n in ((w, "W"), (r, "R"), (b, "B"))]
        inputs.append(helper.make_tensor_value_info(f"h0_{k}", TensorProto.FLOAT, [1, 1, h]))
        outputs.append(helper.make_tensor_value_info(f"hn_{k}", TensorProto.FLOAT, [1, 1, h]))
        nodes.append(
            helper.make_node(
                "GRU",
                [x_name, f"W{k}", f"R{k}", f"B{k}", "", f"h0_{k}"],
                [f"Y{k}", f"hn_{k}"],
                hidden_size=h,
                linear_before_reset=1,
            )
        )
        initializers.append(numpy_helper.from_array(np.array([1], np.int64), f"axis{k}"))
        nodes.append(helper.make_node("Squeeze", [f"Y{k}", f"axis{k}"], [f"X{k + 1}"]))  # (S, 1, N, H) -> (S, N, H)
        x_name = f"X{k + 1}"
    outputs.insert(0, helper.make_tensor_value_info(x_name, TensorProto.FLOAT, [steps, 1, h]))
    session = onnxruntime_session(helper.make_graph(nodes, "stack", inputs, outputs, initializers))
    rng = np.random.default_rng(0)
    feed = {"X": rng.standard_normal((steps, 1, INPUT)).astype(np.float32)}
    feed.update({f"h0_{k}": np.zeros((1, 1, h), np.float32) for k in range(gru.num_layers)})
    results = {x_name: np.empty((steps, 1, h), np.float32)}
    results.update({f"hn_{k}": np.empty((1, 1, h), np.float32) for k in range(gru.num_layers)})
    binding = session.io_binding()
    for name, value in feed.items():
        binding.bind_cpu_input(name, value)
    for name, value in results.items():
        binding.bind_output(name, "cpu", 0, np.float32, list(value.shape), value.ctypes.data)

    def run(bound=(feed, results)):  # ONNX Runtime reads and writes these: alive as long as run is
        session.run_with_iobinding(binding)

    def check():  # ORT against torch on the same input: the graph is the same stack
        run()
        with torch.inference_mode():
            y, _ = gru(torch.from_numpy(feed["X"].transpose(1, 0, 2).copy()))
        return float(np.abs(results[x_name][:, 0] - y.numpy()[0]).max())

    return run, check


def rows(layers, hidden, steps):
    """(name, call) of each implementation of one row, and the largest difference between them."""
    import torch

    gru = _torch_gru(layers, hidden)
    imported = fastgru.from_torch(gru)
    stack = fastgru.GRUStack(imported.layers)
    compact = fastgru.GRUStack(fastgru.from_torch(gru, weight_dtype="bfloat16").layers)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, steps, INPUT)).astype(np.float32)
    state = np.zeros((1, stack.state_size), np.float32)
    y = np.empty((1, 1, steps, hidden), np.float32)
    outs = [(np.empty((1, 1, steps, hidden), np.float32), np.empty((1, 1, hidden), np.float32)) for _ in range(layers)]
    h0s = [np.zeros((1, 1, hidden), np.float32) for _ in range(layers)]

    def one_by_one():
        xk = x
        for op, h0, out in zip(stack.layers, h0s, outs):
            op(xk, h0, None, out=out)
            xk = out[0].reshape(1, steps, hidden)

    fast_model = fastgru.torch.optimize(gru)
    xt = torch.from_numpy(x)
    ht = torch.zeros((layers, 1, hidden))

    def torch_run(model):
        def run():
            with torch.inference_mode():
                model(xt, ht)

        return run

    ort_run, ort_check = _onnx_stack(gru, steps)
    with torch.inference_mode():
        reference = gru(xt, ht)[0].numpy()
    got = stack(x, state.copy(), None)[0].reshape(1, steps, hidden)
    got_compact = compact(x, state.copy(), None)[0].reshape(1, steps, hidden)
    errors = {
        "stack vs torch": float(np.abs(got - reference).max()),
        "stack bf16 vs torch": float(np.abs(got_compact - reference).max()),
        "ONNX Runtime vs torch": ort_check(),
    }
    compact_state = state.copy()
    return [
        ("stack", lambda: stack(x, state, None, out=(y, state))),
        ("stack bf16", lambda: compact(x, compact_state, None, out=(y, compact_state))),
        ("one by one", one_by_one),
        ("ONNX Runtime", ort_run),
        ("torch", torch_run(gru)),
        ("fastgru.torch", torch_run(fast_model)),
    ], errors


def time_blocks(impls, rounds, n):
    """Median µs per call of each (name, call) of ``impls``: 20 calls each first, then in each round a
    block of ``n`` calls of each in turn (the order alternating), after a pause and 3 calls untimed."""
    for _, run in impls:
        for _ in range(20):
            run()
    times = {name: [] for name, _ in impls}
    for k in range(rounds):
        for name, run in impls if k % 2 == 0 else impls[::-1]:
            time.sleep(0.02)  # the previous runtime's spinning threads go to sleep
            for _ in range(3):
                run()
            start = time.perf_counter_ns()
            for _ in range(n):
                run()
            times[name].append((time.perf_counter_ns() - start) / n / 1000)
    return {name: statistics.median(t) for name, t in times.items()}


def runtimes_line(machine):
    """The machine and the runtimes of a stack table, as its note starts."""
    return (
        f"{machine['cpu']} ({machine['isa']}, geometry {machine['geometry']} compiled for "
        f"{machine['compiled_for']}), {machine['numba_threads']} threads; ONNX Runtime "
        f"{machine.get('onnxruntime', '?')} (IOBinding) and torch {machine.get('torch', '?')} on "
        f"{machine['peer_threads']} threads"
    )


def measure(rounds, calls):
    import torch

    torch.set_num_threads(THREADS)
    records = []
    for layers, hidden in STACKS:
        for case, steps in CASES.items():
            impls, errors = rows(layers, hidden, steps)
            med = time_blocks(impls, rounds, max(5, calls // steps))
            record = {"layers": layers, "hidden": hidden, "case": case, "us": med, "max_abs_diff": errors}
            records.append(record)
            print(
                f"{layers}x h{hidden} {case:7s} "
                + "  ".join(f"{name} {t:9.1f}" for name, t in med.items())
                + f"  stack/ORT {med['stack'] / med['ONNX Runtime']:.2f}"
                + f"  bf16/ORT {med['stack bf16'] / med['ONNX Runtime']:.2f}"
                + f"  torch/fastgru.torch {med['torch'] / med['fastgru.torch']:.2f}",
                flush=True,
            )
    return records


def markdown(records, machine):
    lines = [
        "| layers × hidden | case | stack µs | stack bf16 µs | one by one µs | ONNX Runtime µs | stack / ORT "
        "| stack bf16 / ORT | torch µs | fastgru.torch µs | torch / fastgru.torch |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        t = r["us"]
        lines.append(
            f"| {r['layers']} × {r['hidden']} | {r['case']} | {t['stack']:,.1f} | {t['stack bf16']:,.1f} "
            f"| {t['one by one']:,.1f} | {t['ONNX Runtime']:,.1f} | {t['stack'] / t['ONNX Runtime']:.2f} "
            f"| {t['stack bf16'] / t['ONNX Runtime']:.2f} | {t['torch']:,.1f} "
            f"| {t['fastgru.torch']:,.1f} | {t['torch'] / t['fastgru.torch']:.2f} |"
        )
    lines += [
        "",
        f"{runtimes_line(machine)}; batch 1, input 128, float32, medians; frame: µs per frame, "
        f"seq100: µs per 100-step call; OPENBLAS_CORETYPE {machine['OPENBLAS_CORETYPE']}, FASTGRU_SPIN_US "
        f"{os.environ.get('FASTGRU_SPIN_US', 'unset (1000)')}; {machine['date']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--calls", type=int, default=400, help="calls per round of a frame row (fewer per step)")
    parser.add_argument("--json", help="default: benchmarks/results/<cpu>/stacks_results.json (conftest.results_dir)")
    parser.add_argument("--md", help="default: the same folder's stacks_results.md")
    parser.add_argument("--readme")
    args = parser.parse_args(argv)
    records = measure(args.rounds, args.calls)
    machine = machine_info()
    machine["date"] = time.strftime("%Y-%m-%d")
    text = markdown(records, machine)
    args.json = args.json or results_dir() / "stacks_results.json"
    args.md = args.md or results_dir() / "stacks_results.md"
    Path(args.json).write_text(json.dumps({"machine": machine, "records": records}, indent=1) + "\n")
    Path(args.md).write_text(text)
    if args.readme:
        replace_table(args.readme, "stacks", text)
    print(text)


if __name__ == "__main__":
    main()
