"""benchmarks/report.py and the machine facts of benchmarks/conftest.py, on a made-up result file
(the benchmarks themselves run only on request: benchmarks/README.md)."""

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name):
    """A module of benchmarks/, imported under a name of its own with benchmarks/ on the path
    (sys.path as it was afterwards: benchmarks/conftest.py adds to it)."""
    path = list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(f"fastgru_bench_{name}", BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = path


@pytest.fixture(scope="module")
def report():
    return _load("report")


def _bench(shape, impl, median, mode, round_=0, **machine):
    info = {"shape": shape, "impl": impl, "flops": 2e6, "round": round_, "mode": mode, **machine}
    if mode == "spaced":
        info["pause_ms"] = [2.0, 20.0]
    return {"extra_info": info, "stats": {"median": median}}


def test_the_ratio_is_against_the_fastest_peer_variant_in_both_tables(report, tmp_path):
    machine = {"cpu": "Test CPU", "isa": "AVX-512", "cpu_name": "znver4"}
    benches = []
    for round_, scale in enumerate([1.0, 1.1, 0.9]):  # the median of the rounds' medians
        for mode, times in (
            (
                "back-to-back",
                {"fastgru_prepared": 10e-6, "onnxruntime": 12e-6, "onnxruntime_run": 16e-6, "openvino": 40e-6},
            ),
            ("spaced", {"fastgru_prepared": 30e-6, "onnxruntime": 25e-6, "onnxruntime_run": 20e-6}),
        ):
            benches += [_bench("cell-b1", impl, t * scale, mode, round_, **machine) for impl, t in times.items()]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"benchmarks": benches}))
    modes, facts, pause = report.load(path)
    assert set(modes) == {"back-to-back", "spaced"} and pause == [2.0, 20.0]
    assert facts == machine
    text = report.table(modes["back-to-back"], facts, modes["spaced"], pause)
    back, spaced = [line for line in text.splitlines() if line.startswith("| cell-b1 ")]
    assert back.endswith("| 200 | onnxruntime | 167 | 0.83 |")  # 10 / 12: IOBinding was the faster variant
    assert spaced.endswith("| onnxruntime_run | 1.50 |")  # 30 / 20
    assert "| 10.0 | 40.0 | 12.0 | 16.0 |" in back  # µs per implementation, in IMPLS order
    assert "a pause of 2-20 ms before each call" in text
    assert "Machine: cpu Test CPU, isa AVX-512, cpu_name znver4." in text


def test_results_without_a_mode_are_back_to_back(report, tmp_path):
    path = tmp_path / "old.json"
    path.write_text(
        json.dumps(
            {
                "benchmarks": [
                    {
                        "extra_info": {"shape": "s", "impl": "fastgru_prepared", "flops": 1, "round": 0},
                        "stats": {"median": 1e-6},
                    }
                ]
            }
        )
    )
    modes, _, pause = report.load(path)
    assert list(modes) == ["back-to-back"] and pause is None
    assert "spaced calls" not in report.table(modes["back-to-back"], {})


def test_every_result_records_the_isa():
    conftest = _load("conftest")
    isa = conftest.cpu_isa()
    assert isa["isa"] in ("AVX-512", "AVX2", "other") and isa["cpu_name"]
    from fastgru import _isa

    geometry = conftest.kernel_geometry()
    assert geometry["geometry"] == _isa.GEOMETRY.name and geometry["compiled_for"] == _isa.TARGET_CPU
    assert geometry["float32_tiles"].split()[0] == f"{_isa.GEOMETRY.tiles[0][0]}x{_isa.GEOMETRY.panel_width(4)}"


def test_the_readme_table_between_its_markers(report, tmp_path, monkeypatch):
    """--marker names the README's markers: the AVX2 table replaces only its own."""
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"benchmarks": [_bench("cell-b1", "fastgru_prepared", 1e-5, "back-to-back")]}))
    readme = tmp_path / "README.md"
    readme.write_text(
        "a\n<!-- bench:start -->\nold\n<!-- bench:end -->\nb\n<!-- bench-avx2:start -->\nold\n<!-- bench-avx2:end -->\n"
    )
    monkeypatch.chdir(tmp_path)
    argv = ["report.py", str(path), "--md", "t.md", "--png", "t.png", "--readme", str(readme), "--marker", "bench-avx2"]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(report, "chart", lambda rows, png: None)  # matplotlib is a bench extra
    report.main()
    text = readme.read_text()
    assert "<!-- bench:start -->\nold\n<!-- bench:end -->" in text
    assert "<!-- bench-avx2:start -->\n| shape |" in text and text.endswith("<!-- bench-avx2:end -->\n")
    assert text.count("old") == 1


# ----------------------------------------------------------------------------------- where results go

FOLDER = re.compile(r"^[a-z0-9]+-(avx512|avx2|generic)(code)?$")
#: Results files whose names are not scripts of benchmarks/ (benchmarks/README.md, "Results").
NOT_SCRIPTS = {"aarch64_ci": ".ci/aarch64.sh", "candidate_numpy": "python -m fastgru bench"}


def test_the_folder_of_a_machine():
    conftest = _load("conftest")
    assert conftest.machine_folder({"cpu_name": "znver4", "isa": "AVX-512", "geometry": "avx512"}) == "zen4-avx512"
    assert conftest.machine_folder({"cpu_name": "znver4", "isa": "AVX-512", "geometry": "avx2"}) == "zen4-avx2code"
    assert conftest.machine_folder({"cpu_name": "znver3", "isa": "AVX2", "geometry": "avx2"}) == "zen3-avx2"
    assert conftest.machine_folder({"cpu_name": "neoverse-v1", "isa": "other", "geometry": "generic"}) == (
        "neoverse-v1-generic"
    )
    assert FOLDER.match(conftest.machine_folder())  # this machine's, as a script names it


def test_the_top_level_holds_only_scripts_their_readme_and_folders():
    stray = [
        p.name
        for p in BENCHMARKS.iterdir()
        if not (p.suffix == ".py" or p.name == "README.md" or p.name in ("results", "ab", "__pycache__"))
        and p.name not in (".benchmarks",)
        and not (p.suffix == ".json" and p.name.startswith("results"))  # a run's scratch JSON (.gitignore)
    ]
    assert not stray, stray


@pytest.mark.parametrize("kind", ["results", "ab"])
def test_every_results_file_is_in_its_machines_folder(kind):
    """Folders are named <family>-<isa>; a JSON whose machine facts name the CPU, its ISA and the
    kernels' geometry sits in the folder those facts name; in results/, each file is named after the
    script that wrote it."""
    conftest = _load("conftest")
    scripts = {p.stem for p in BENCHMARKS.glob("*.py")}
    folders = sorted(p for p in (BENCHMARKS / kind).iterdir() if p.is_dir())
    assert folders and all(FOLDER.match(p.name) for p in folders), [p.name for p in folders]
    placed = 0
    for path in sorted((BENCHMARKS / kind).glob("*/*")):
        if kind == "results":
            script = path.name.split("_results")[0]
            assert "_results" in path.name and (script in scripts or script in NOT_SCRIPTS), path
        if path.suffix == ".json":
            data = json.loads(path.read_text())
            facts = data.get("machine") if isinstance(data, dict) else None
            if facts and {"cpu_name", "isa", "geometry"} <= set(facts):
                assert conftest.machine_folder(facts) == path.parent.name, path
                placed += 1
    assert placed >= (10 if kind == "results" else 2)
