"""fastgru.reference (the public NumPy reference), the named suites, fastgru.benchmark.compare and
``python -m fastgru bench --candidate``: a correct, a wrong and a prepared candidate, on the tiny
suite with few rounds."""

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_close, make_case

import fastgru
from fastgru import _cli, benchmark, reference

ROOT = Path(__file__).resolve().parent.parent
QUICK = {"rounds": 1, "seconds": 0.001}
CLI_QUICK = ["--rounds", "1", "--seconds", "0.001"]


# ------------------------------------------------------------------------------ fastgru.reference


@pytest.mark.parametrize("linear_before_reset", [False, True])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_the_reference_agrees_with_fastgru_in_float32_on_ragged_batches(rng, direction, linear_before_reset):
    case = make_case(
        rng,
        batch=5,
        seq_len=7,
        input_size=6,
        hidden_size=9,
        direction=direction,
        linear_before_reset=linear_before_reset,
        clip=2.5,
    )
    assert len(set(case.inputs["sequence_lengths"])) > 1  # ragged, with a row of length 0 and a full one
    got = fastgru.gru_sequence(**case.inputs, **case.attrs)
    want = reference.gru_sequence(**case.inputs, **case.attrs)
    assert_close(got, want, np.float32, what=f"{direction} lbr{int(linear_before_reset)}")


@pytest.mark.parametrize("layout", ["documented", "openvino"])
def test_the_reference_agrees_with_fastgru_on_augru_and_the_cell(rng, layout):
    case = make_case(rng, op="augru_sequence", batch=4, seq_len=6, hidden_size=8, layout=layout)
    assert_close(fastgru.augru_sequence(**case.inputs), reference.augru_sequence(**case.inputs), np.float32)
    case = make_case(rng, op="gru_cell", batch=4, hidden_size=8, linear_before_reset=True)
    assert_close(fastgru.gru_cell(**case.inputs, **case.attrs), reference.gru_cell(**case.inputs, **case.attrs))


def test_the_reference_is_self_contained_numpy_and_was_moved_not_copied():
    source = (ROOT / "fastgru" / "reference.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add("." * node.level + (node.module or ""))
    assert imported == {"math", "numpy"}
    copies = [p for folder in ("tests", "benchmarks", "docs") for p in (ROOT / folder).rglob("reference.py")]
    assert copies == []
    assert fastgru.reference is reference


# ------------------------------------------------------------------------------------------ suites


def test_the_suites_are_named_versions_of_the_benchmark_shapes():
    """A published suite never changes: these are its shapes, by id, in order."""
    assert {name: [s.id for s in shapes] for name, shapes in benchmark.SUITES.items()} == {
        "latency-v1": [
            "seq-b1-s100-i64-h128-lbr0",
            "seq-b1-s100-i64-h128-lbr1",
            "seq-b1-s100-i64-h256-lbr0",
            "seq-b1-s100-i64-h256-lbr1",
            "seq-b1-s100-i64-h512-lbr0",
            "seq-b1-s100-i64-h512-lbr1",
            "cell-b1-s1-i256-h256-lbr0",
            "cell-b1-s1-i256-h256-lbr1",
        ],
        "throughput-v1": [
            "seq-b64-s100-i256-h256-lbr0",
            "seq-b16-s50-i128-h256-bidi-lbr0",
            "cell-b64-s1-i256-h256-lbr0",
            "cell-b64-s1-i256-h256-lbr1",
        ],
        "dien-v1": ["seq-b128-s50-i36-h36-lbr0", "augru-b128-s50-i36-h36-lbr0"],
        "tiny-v1": ["seq-b1-s1-i4-h4-lbr0", "cell-b1-s1-i4-h4-lbr0", "augru-b1-s1-i4-h4-lbr0"],
    }
    assert set(benchmark.SUITE_NOTES) == set(benchmark.SUITES)
    assert [shape for _, shape in _cli.BENCH_SHAPES] == [s for shapes in benchmark.SUITES.values() for s in shapes]


def test_a_shape_knows_its_flops_and_the_bytes_of_its_weights():
    shape = benchmark.Shape("gru_sequence", 16, 50, 128, 256, direction="bidirectional")
    assert shape.flops == 2 * 16 * 50 * 2 * 3 * 256 * (128 + 256)
    assert shape.weight_bytes() == 2 * (3 * 256 * 128 + 3 * 256 * 256 + 3 * 256) * 4
    assert shape.weight_bytes("float64") == 2 * shape.weight_bytes("float32")
    lbr = benchmark.Shape("gru_cell", 1, 1, 4, 4, lbr=True)
    assert lbr.weight_bytes() == (12 * 4 + 12 * 4 + 16) * 4
    packed = fastgru.GRUSequence(**{k: v for k, v in _weights(shape).items()}, direction="bidirectional")
    assert packed._packed.flops(shape.batch, shape.seq) == shape.flops  # fastgru's own count


def _weights(shape):
    inputs, _ = shape.arguments()
    return {name: inputs[name] for name in ("W", "R", "B")}


@pytest.mark.parametrize("op", benchmark.OPS)
def test_the_arguments_are_those_of_fastgrus_function_in_openvinos_layout(op):
    shape = benchmark.suite_shapes("tiny-v1", op)[0]
    inputs, attributes = shape.arguments("float64")
    assert list(inputs) == list(benchmark._INPUTS[op])
    assert all(a.dtype == np.float64 and a.flags.c_contiguous for k, a in inputs.items() if k != "sequence_lengths")
    assert inputs["initial_hidden_state"].ndim == (2 if op == "gru_cell" else 3)
    assert (
        attributes
        == {
            "gru_sequence": {"direction": "forward", "linear_before_reset": False},
            "gru_cell": {"linear_before_reset": False},
            "augru_sequence": {},
        }[op]
    )
    fastgru_result = getattr(fastgru, op)(*inputs.values(), **attributes)  # fastgru takes them as they are
    float32, _ = shape.arguments("float32")
    assert np.array_equal(float32["X"], inputs["X"])  # the same values in every dtype
    assert fastgru_result is not None


@pytest.mark.parametrize(
    "name, op, message",
    [
        ("latency-v2", None, r"^benchmark: suite 'latency-v2' is unknown; expected one of latency-v1, "),
        (
            "latency-v1",
            "augru_sequence",
            r"no augru_sequence shape; suites with augru_sequence shapes: dien-v1, tiny-v1",
        ),
        (
            "tiny-v1",
            "lstm",
            r"^benchmark: op 'lstm' is unknown; expected one of gru_sequence, gru_cell, augru_sequence",
        ),
    ],
)
def test_unknown_suites_and_ops_are_refused(name, op, message):
    with pytest.raises(fastgru.FastGRUError, match=message):
        benchmark.suite_shapes(name, op)
    with pytest.raises(fastgru.FastGRUError, match=message):
        benchmark.select(name, op)


def test_of_several_suites_those_without_shapes_of_the_op_add_none():
    assert [shape.id for _, shape in benchmark.select(["throughput-v1", "dien-v1"], "gru_cell")] == [
        "cell-b64-s1-i256-h256-lbr0",
        "cell-b64-s1-i256-h256-lbr1",
    ]
    assert [name for name, _ in benchmark.select(op="augru_sequence")] == ["dien-v1", "tiny-v1"]
    assert len(benchmark.select()) == sum(map(len, benchmark.SUITES.values()))
    with pytest.raises(fastgru.FastGRUError, match="suites latency-v1, throughput-v1 have no augru_sequence shape"):
        benchmark.select(["latency-v1", "throughput-v1"], "augru_sequence")


# ------------------------------------------------------------------------------------ candidates


def off_by_a_hundredth(*args, **attributes):
    """gru_sequence with Ho off by 1e-2."""
    Y, Ho = reference.gru_sequence(*args, **attributes)
    return Y, Ho + np.float32(0.01)


def test_a_correct_candidate_gets_records_with_times_ratios_and_its_difference():
    records = benchmark.compare(reference.gru_sequence, suite="tiny-v1", **QUICK)
    (record,) = records
    assert record["shape"] == "seq-b1-s1-i4-h4-lbr0" and record["suite"] == "tiny-v1" and record["ok"]
    assert record["candidate"] == "fastgru.reference:gru_sequence" and not record["prepared"]
    assert set(record["seconds"]) == {"candidate", "fastgru_prepared", "fastgru"}
    assert all(t > 0 for t in record["seconds"].values())
    assert record["ratio_prepared"] == record["seconds"]["candidate"] / record["seconds"]["fastgru_prepared"]
    assert 0 < record["max_abs_difference"]["Ho"] < 1e-6 and record["share_of_tolerance"] < 1
    assert record["tolerance"] == [1e-4, 2e-5] and record["flops"] == 192
    assert record["calls_per_round"]["candidate"] >= benchmark.MIN_CALLS
    json.dumps(records)  # records are plain data
    text = benchmark.table(records)
    assert "| tiny-v1 | seq-b1-s1-i4-h4-lbr0 |" in text and "candidate / fastgru_prepared" in text


def test_a_wrong_candidate_is_named_with_the_shape_and_the_output_and_not_timed():
    with pytest.raises(benchmark.CandidateMismatch) as raised:
        benchmark.compare(off_by_a_hundredth, suite="tiny-v1", **QUICK)
    (line,) = raised.value.failures
    assert line.startswith("tiny-v1 seq-b1-s1-i4-h4-lbr0: Ho differs from fastgru's by up to 0.01 ")
    assert "beyond the float32 tolerance |difference| <= 2e-05 + 0.0001·|fastgru|" in line
    assert isinstance(raised.value, fastgru.FastGRUError)
    (record,) = raised.value.records
    assert not record["ok"] and "seconds" not in record
    assert record["max_abs_difference"]["Y"] < 1e-6 and record["max_abs_difference"]["Ho"] > 9e-3


@pytest.mark.parametrize(
    "op, factory", [("gru_sequence", "GRUSequence"), ("gru_cell", "GRUCell"), ("augru_sequence", "AUGRUSequence")]
)
def test_a_prepared_candidate_is_made_once_with_the_weights_and_attributes(op, factory):
    made = []

    def prepare(W, R, B, **attributes):
        made.append(attributes)
        return getattr(fastgru, factory)(W, R, B, **attributes)

    (record,) = benchmark.compare(prepared=prepare, op=op, suite="tiny-v1", **QUICK)
    assert len(made) == 1 and record["prepared"] and record["ok"]
    assert made[0] == benchmark.suite_shapes("tiny-v1", op)[0].arguments()[1]
    assert set(record["max_abs_difference"].values()) == {0.0}  # fastgru's prepared op: the same bits


def test_the_candidate_gets_its_own_copies_of_exactly_fastgrus_arguments():
    seen = []

    def spy(*args, **attributes):
        seen.append((args, attributes))
        return reference.augru_sequence(*args, **attributes)

    benchmark.compare(spy, op="augru_sequence", suite="tiny-v1", **QUICK)
    args, attributes = seen[0]
    inputs, _ = benchmark.SUITES["tiny-v1"][2].arguments()
    assert attributes == {} and len(args) == len(inputs)
    assert all(np.array_equal(a, b) and a is not b for a, b in zip(args, inputs.values()))
    assert all(call[0][0] is args[0] for call in seen)  # the same arrays in every call
    assert len(seen) >= 1 + 2 + 1 + benchmark.MIN_CALLS  # check, calibration, a warm-up and the timed calls


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda *a, **k: reference.gru_sequence(*a, **k)[1], r"returned 1 result; expected \(Y, Ho\)"),
        (
            lambda *a, **k: tuple(r.astype(np.float64) for r in reference.gru_sequence(*a, **k)),
            r"Y is float64; expected float32",
        ),
        (
            lambda *a, **k: (reference.gru_sequence(*a, **k)[0][:, 0], reference.gru_sequence(*a, **k)[1]),
            r"Y has shape \(1, 1, 4\); expected \(1, 1, 1, 4\)",
        ),
        (
            lambda *a, **k: (a[1].fill(1), reference.gru_sequence(*a, **k))[1],
            r"modified its input initial_hidden_state",
        ),
        (
            lambda *a, **k: (reference.gru_sequence(*a, **k)[0] * np.nan, reference.gru_sequence(*a, **k)[1]),
            r"Y differs from fastgru's by up to nan",
        ),
    ],
    ids=["count", "dtype", "shape", "modified", "nan"],
)
def test_every_kind_of_wrong_result_is_named(bad, message):
    with pytest.raises(benchmark.CandidateMismatch, match=message):
        benchmark.compare(bad, suite="tiny-v1", **QUICK)


def test_the_rounds_rotate_and_the_candidate_is_timed_by_the_same_loop(monkeypatch):
    order = []
    real = benchmark._time

    def spy(call, n):
        order.append(call)
        return real(call, n)

    monkeypatch.setattr(benchmark, "_time", spy)
    records = benchmark.compare(reference.gru_cell, op="gru_cell", suite="tiny-v1", rounds=3, seconds=0.001)
    assert len(order) == 9 and len(set(order)) == 3  # 3 implementations × 3 rounds, every one by _time
    assert order[0] is order[5] is order[7] and order[0] is not order[3]  # round r starts with the r-th
    assert all(len(medians) == 3 for medians in records[0]["round_seconds"].values())


def test_the_timing_loop_itself_costs_a_microsecond_or_so():
    """A candidate that returns a kept result measures the loop's own cost, which every
    implementation pays alike: nothing of the check or the command line is in it."""
    kept = {}

    def cached(*args, **attributes):
        if not kept:
            kept["result"] = reference.gru_sequence(*args, **attributes)
        return kept["result"]

    (record,) = benchmark.compare(cached, suite="tiny-v1", rounds=3, seconds=0.003)
    assert record["seconds"]["candidate"] < 20e-6  # 0.5 µs on the 2-core test machine


def test_a_candidate_that_raises_stops_the_run_naming_the_shape():
    def broken(*args, **attributes):
        raise RuntimeError("not implemented yet")

    with pytest.raises(RuntimeError, match="not implemented yet") as raised:
        benchmark.compare(broken, op="gru_cell", suite="tiny-v1", **QUICK)
    if hasattr(raised.value, "__notes__"):
        assert raised.value.__notes__ == ["fastgru.benchmark: raised by the candidate on tiny-v1 cell-b1-s1-i4-h4-lbr0"]


def test_a_float16_candidate_is_held_to_two_units_of_float16():
    (record,) = benchmark.compare(reference.gru_cell, op="gru_cell", suite="tiny-v1", dtype="float16", **QUICK)
    assert record["ok"] and record["tolerance"] == [2 * 2.0**-10, 2e-5] and record["dtype"] == "float16"


def test_compare_refuses_bad_settings():
    with pytest.raises(fastgru.FastGRUError, match="not both"):
        benchmark.compare(reference.gru_sequence, prepared=fastgru.GRUSequence, suite="tiny-v1")
    with pytest.raises(fastgru.FastGRUError, match="rounds is 0; expected an int >= 1"):
        benchmark.compare(reference.gru_sequence, suite="tiny-v1", rounds=0)
    with pytest.raises(TypeError, match="dtype is int32; expected float16, float32, float64 or bfloat16"):
        benchmark.compare(reference.gru_sequence, suite="tiny-v1", dtype="int32")


def test_fastgru_alone_and_in_float64():
    records = benchmark.compare(suite="tiny-v1", op=None, dtype="float64", **QUICK)
    assert [r["op"] for r in records] == ["gru_sequence", "gru_cell", "augru_sequence"]
    assert all(set(r["seconds"]) == {"fastgru_prepared", "fastgru"} and r["candidate"] is None for r in records)
    assert "fastgru alone, float64" in benchmark.table(records)


def test_the_loader_finds_modules_files_and_dotted_names(tmp_path):
    path = tmp_path / "my_kernels.py"
    path.write_text("class Kernels:\n    @staticmethod\n    def gru(*a, **k):\n        return 1\n")
    assert benchmark.load(f"{path}:Kernels.gru")() == 1
    for spec, message in [
        ("gru", "is not MODULE:FUNCTION"),
        (f"{tmp_path / 'none.py'}:gru", "which does not exist"),
        ("fastgru.reference:lstm", "module 'fastgru.reference' has no 'lstm'"),
        ("fastgru:__version__", "is a str; expected a callable"),
    ]:
        with pytest.raises(fastgru.FastGRUError, match=re.escape(message)):
            benchmark.load(spec)


# --------------------------------------------------------------------------------- command line


def test_the_command_line_times_a_correct_candidate(capsys, tmp_path):
    plot = importlib.util.find_spec("matplotlib") is not None  # optional: the test extra has no matplotlib
    argv = ["bench", "--candidate", "fastgru.reference:gru_cell", "--op", "gru_cell", "--suite", "tiny-v1", *CLI_QUICK]
    argv += ["--suite", "dien-v1"]  # no gru_cell shape: left out, with a note
    argv += ["--json", str(tmp_path / "r.json")] + (["--plot", str(tmp_path / "r.png")] if plot else [])
    status = _cli.main(argv)
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "fastgru bench: dien-v1 has no gru_cell shape: left out" in err
    rows = [line for line in out.splitlines() if line.startswith("| tiny-v1 ") or line.startswith("| dien-v1 ")]
    assert len(rows) == 1 and rows[0].startswith("| tiny-v1 | cell-b1-s1-i4-h4-lbr0 | ")
    cells = rows[0].split("|")
    assert float(cells[8]) > 0 and float(cells[9]) > 0  # candidate / fastgru_prepared, candidate / fastgru
    assert out.startswith("candidate fastgru.reference:gru_cell, op gru_cell, float32;")
    assert "Machine: cpu " in out and "geometry " in out
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["records"][0]["shape"] == "cell-b1-s1-i4-h4-lbr0" and saved["machine"]["cores"]
    assert not plot or (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_line_exits_1_naming_a_wrong_candidates_difference(capsys, tmp_path):
    path = tmp_path / "wrong.py"
    path.write_text(
        "import numpy as np\nfrom fastgru import reference\n\n\ndef gru(*args, **attributes):\n"
        "    Y, Ho = reference.gru_sequence(*args, **attributes)\n    return Y, Ho + np.float32(0.01)\n"
    )
    status = _cli.main(["bench", "--candidate", f"{path}:gru", "--suite", "tiny-v1", *CLI_QUICK])
    out, err = capsys.readouterr()
    assert status == 1 and out == ""
    assert f"{path}:gru is wrong; nothing was timed" in err
    assert "FAIL tiny-v1 seq-b1-s1-i4-h4-lbr0: Ho differs from fastgru's by up to 0.01 " in err


def test_the_command_line_takes_a_prepared_candidate(capsys):
    status = _cli.main(
        ["bench", "--prepared", "fastgru:AUGRUSequence", "--op", "augru_sequence", "--suite", "tiny-v1", *CLI_QUICK]
    )
    out, err = capsys.readouterr()
    assert status == 0, err
    assert out.startswith("prepared candidate fastgru:AUGRUSequence, op augru_sequence")
    assert "| tiny-v1 | augru-b1-s1-i4-h4-lbr0 |" in out and out.count("| 0 (0) |") == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--candidate", "nowhere"], "--candidate nowhere: benchmark: 'nowhere' is not MODULE:FUNCTION"),
        (["--candidate", "no_such_module_here:f"], "No module named 'no_such_module_here'"),
        (
            ["--candidate", "fastgru.reference:gru_sequence", "--op", "augru_sequence", "--suite", "latency-v1"],
            "has no augru_sequence shape",
        ),
        (["--candidate", "a:b", "--prepared", "c:d"], "not allowed with argument"),
        (["--rounds", "0"], "expected at least one round and a positive budget"),
    ],
)
def test_command_line_errors_exit_2_with_a_message(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        _cli.main(["bench", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_candidates_own_fastgru_error_is_its_traceback_not_a_usage_error(tmp_path):
    path = tmp_path / "cut.py"
    path.write_text(
        "import fastgru\n\n\ndef gru(X, H0, lengths, W, R, B, **attributes):\n"
        "    return fastgru.gru_sequence(X, H0, lengths, W[:, :3], R, B, **attributes)\n"
    )
    with pytest.raises(fastgru.FastGRUError, match=r"^gru_sequence: W has shape \(1, 3, 4\)") as raised:
        _cli.main(["bench", "--candidate", f"{path}:gru", "--suite", "tiny-v1", *CLI_QUICK])
    if hasattr(raised.value, "__notes__"):
        assert raised.value.__notes__ == ["fastgru.benchmark: raised by the candidate on tiny-v1 seq-b1-s1-i4-h4-lbr0"]


def test_plot_without_matplotlib_says_so_before_running(capsys, monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else find_spec(name, *a)
    )
    with pytest.raises(SystemExit) as exit_info:
        _cli.main(["bench", "--candidate", "fastgru.reference:gru_sequence", "--plot", "x.png"])
    assert exit_info.value.code == 2
    assert "--plot needs matplotlib, which is not installed: pip install matplotlib" in capsys.readouterr().err


def test_the_suites_are_listed_and_documented(capsys):
    assert _cli.main(["bench", "--list-suites"]) == 0
    listed = capsys.readouterr().out.strip()
    assert listed == _cli.suites_table()
    doc = (ROOT / "docs" / "benchmarking.md").read_text()
    for line in listed.splitlines():
        assert line in doc, line  # docs/benchmarking.md shows the table as the command prints it
    for name in benchmark.SUITES:
        assert f"- {name}: " in doc  # docs/benchmarking.md lists every suite


def test_the_pytest_benchmark_recipe_groups_the_candidate_with_fastgru(tmp_path):
    pytest.importorskip("pytest_benchmark")
    command = [sys.executable, "-m", "pytest", str(ROOT / "docs" / "test_benchmark_candidate.py"), "-q"]
    command += ["-p", "no:cacheprovider", "--benchmark-min-time=0.0001", "--benchmark-max-time=0.001"]
    command += ["--benchmark-warmup=off", f"--benchmark-storage={tmp_path}", "--benchmark-columns=median"]
    env = {**os.environ, "BENCH_SUITE": "tiny-v1", "BENCH_OP": "gru_cell"}
    first = subprocess.run(
        [*command, "--benchmark-autosave"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert first.returncode == 0, first.stdout + first.stderr
    second = subprocess.run(
        [*command, "--benchmark-compare"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert second.returncode == 0, second.stdout + second.stderr
    group = second.stdout.split("benchmark 'cell-b1-s1-i4-h4-lbr0'", 1)[1]
    for impl in ("candidate", "fastgru_prepared", "fastgru"):
        assert f"[cell-b1-s1-i4-h4-lbr0-{impl}] (NOW)" in group and f"[cell-b1-s1-i4-h4-lbr0-{impl}] (0001_" in group
