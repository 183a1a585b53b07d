"""Cold start (issue 4): where compiled kernels persist, the fallbacks when they cannot, warmup(),
and the command line."""

import os
import subprocess
import sys
import textwrap

import numba
import pytest

import fastgru
from fastgru import FastGRUError, _cli, _config


def _twice(x):
    return 2 * x


def test_kernels_persist_in_fastgru_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setattr(_config, "CACHE_DIR", str(tmp_path))
    before = numba.config.CACHE_DIR
    twice = _config.kernel()(_twice)
    assert numba.config.CACHE_DIR == before  # other Numba users of the process keep their folder
    assert twice(21) == 42
    folder = _config.cache_folder(twice)
    assert folder.startswith(str(tmp_path / _config.CACHE_TAG))  # a folder of this geometry and these sources
    assert {name.rsplit(".", 1)[-1] for name in os.listdir(folder)} >= {"nbi", "nbc"}


def test_unusable_cache_dir_falls_back_to_the_default_folders(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(_config, "CACHE_DIR", str(blocker / "cache"))  # cannot be made: a file is in the way
    twice = _config.kernel()(_twice)
    assert twice(2) == 4
    folder = _config.cache_folder(twice)
    assert not folder.startswith(str(blocker)) and _config.CACHE_TAG in folder


def test_no_writable_folder_anywhere_compiles_without_cache(monkeypatch, tmp_path):
    monkeypatch.setattr(_config, "_writable", lambda folder: False)
    twice = _config.kernel()(_twice)
    assert twice(3) == 6
    assert _config.cache_folder(twice) is None


def test_each_geometry_has_a_cache_folder_of_its_own(tmp_path):
    """A process never loads another geometry's compiled kernels: each has its own folder."""
    code = "from fastgru import _config; print(_config.cache_root())"
    folders = set()
    for isa in ("generic", ""):
        env = {**os.environ, "FASTGRU_CACHE_DIR": str(tmp_path), "FASTGRU_ISA": isa}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        folders.add(done.stdout.strip())
    assert len(folders) == 2 and all(f.startswith(str(tmp_path)) for f in folders)
    assert any("numba-generic-" in f for f in folders)


_CALL = textwrap.dedent("""
    import numpy as np, fastgru
    from fastgru import _config
    rng = np.random.default_rng(0)
    h = fastgru.gru_cell(rng.standard_normal((3, 4), dtype=np.float32), np.zeros((3, 5), np.float32),
                         rng.standard_normal((15, 4), dtype=np.float32), rng.standard_normal((15, 5), dtype=np.float32))
    print(h.tobytes().hex(), *_config.compile_counts())
""")


def test_processes_share_a_new_cache_folder(tmp_path):
    """Two processes compile into one empty folder at once; a third loads the kernel from it."""
    env = {**os.environ, "FASTGRU_CACHE_DIR": str(tmp_path)}
    run = [sys.executable, "-c", _CALL]
    first = [
        subprocess.Popen(run, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outputs = [p.communicate(timeout=600) for p in first]
    assert all(p.returncode == 0 for p in first), [err[-2000:] for _, err in outputs]
    third = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stderr[-2000:]
    checksum, loaded, compiled = third.stdout.split()
    assert {out.split()[0] for out, _ in outputs} == {checksum}
    assert all(int(out.split()[2]) > 0 for out, _ in outputs)  # each compiled (the other may have saved some first)
    assert int(loaded) > 0 and compiled == "0"  # loaded, not compiled
    assert any(name.endswith(".nbc") for _, _, files in os.walk(tmp_path) for name in files)


_WARMUP = textwrap.dedent("""
    import threading, numpy as np, fastgru
    from fastgru._kernels import drivers
    def kinds():  # the drivers' callbacks compiled or loaded, by weights dtype
        done = drivers.compiled()
        return [sorted(w for d, w in done if d == driver) for driver in ("serial", "parallel", "split", "pair")]
    before = kinds()
    fastgru.warmup(dtypes=[np.float64, "float16"], ops="gru_sequence")
    partner = any(t.name == "fastgru-partner" for t in threading.enumerate())
    print(before, kinds(), partner)
""")


def test_warmup_compiles_every_kernel_path_of_each_dtype():
    """In a fresh process (the kernels come from the cache that earlier tests filled)."""
    done = subprocess.run([sys.executable, "-c", _WARMUP], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    both = "['float32', 'float64']"
    assert done.stdout.split("] ", 1)[0] + "]" == "[[], [], [], []]"  # nothing before warmup
    assert done.stdout.strip().endswith(f"[{both}, {both}, {both}, {both}] True")


def test_after_warmup_a_row_shared_with_the_partner_loads_no_kernel():
    """A one-row cell on the pair path, called enough times to take its plan (whose job for the pair
    driver has a callback of its own), and a function call of one row and one step: warmup() has
    made every kernel they run ready."""
    code = textwrap.dedent("""
        import numpy as np, fastgru
        from fastgru import _config, _partner
        fastgru.warmup()
        before = _config.compile_counts()
        h = 256
        rng = np.random.default_rng(0)
        cell = fastgru.GRUCell(*(rng.uniform(-0.06, 0.06, (3 * h, h)).astype(np.float32) for _ in range(2)))
        x, state = np.ones((1, h), np.float32), np.zeros((1, h), np.float32)
        for _ in range(50):
            cell(x, state, out=state)
        paired = before == _config.compile_counts()
        before = _config.compile_counts()
        fastgru.gru_cell(x, state, *(np.zeros((3 * h, h), np.float32) for _ in range(2)))  # run_direct
        print(_partner.PARTNER.enabled, paired, before == _config.compile_counts(), _config.compile_counts())
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    enabled, paired, direct = done.stdout.split()[:3]
    assert paired == "True" or enabled == "False", done.stdout
    assert direct == "True", done.stdout


def test_after_warmup_a_stack_as_a_wavefront_loads_no_kernel():
    """A one-row sequence through a stack of forward layers, called until the partner takes its part
    of the wavefront: warmup(ops=['gru_stack']) has made its kernels ready, the partner's included.
    The partner spins for an hour once woken (FASTGRU_SPIN_US): awake at every call, whatever the
    time between calls, it takes its part as soon as its thread runs (the 600 s only stop a hang)."""
    code = textwrap.dedent("""
        import time
        import numpy as np, fastgru
        from fastgru import _config, _partner, _stack, _tuning
        fastgru.warmup(ops=["gru_stack"])
        before = _config.compile_counts()
        _tuning.PAIR_WAKE_FLOPS = 0  # every call wakes the partner
        rng = np.random.default_rng(0)
        layers = [fastgru.GRUSequence(*(rng.uniform(-0.2, 0.2, shape).astype(np.float32)
                                        for shape in ((1, 48, i), (1, 48, 16), (1, 48)))) for i in (3, 16)]
        stack = fastgru.GRUStack(layers)
        X, state = np.ones((1, 20, 3), np.float32), np.zeros((1, stack.state_size), np.float32)
        y, ho = (np.empty(shape, np.float32) for shape in stack.result_shapes(1, 20))
        ran, end = None, time.monotonic() + 600  # until the partner took its part
        while ran != ("wave", "wave") and time.monotonic() < end:
            ran = stack.run(1, 20, (X, state, None, _stack.NO_ROWS, None, y, ho), path="wave")
        print(_partner.PARTNER.enabled, ran == ("wave", "wave"), before == _config.compile_counts())
    """)
    env = {**os.environ, "FASTGRU_SPIN_US": "3600000000"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    enabled, took, loaded_nothing = done.stdout.split()
    assert took == "True" or enabled == "False", done.stdout
    assert loaded_nothing == "True", done.stdout


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtypes": ["int8"]}, "warmup: dtypes has 'int8'; expected some of float16, float32, float64, bfloat16"),
        ({"ops": ["lstm"]}, "warmup: ops has 'lstm'; expected some of gru_cell, gru_sequence, augru_sequence"),
        (
            {"weight_dtypes": ["fp8"]},
            "warmup: weight_dtypes has 'fp8'; expected some of exact, bfloat16, int8, bfloat16x3",
        ),
    ],
)
def test_warmup_errors(kwargs, message):
    with pytest.raises(FastGRUError, match=message):
        fastgru.warmup(**kwargs)


def test_info_command():
    done = subprocess.run([sys.executable, "-m", "fastgru", "info"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(":", 1) for line in done.stdout.splitlines())
    assert lines["fastgru"].split()[0] == fastgru.__version__
    assert {"numba", "simd", "threads", "threading layer", "cache folder", "FASTGRU_CACHE_DIR"} <= set(lines)


def test_bench_command(capsys):
    before = fastgru.get_num_threads()
    try:
        assert _cli.main(["bench", "--seconds", "0.001", "--threads", "1"]) == 0
    finally:
        fastgru.set_num_threads(before)
    out, err = capsys.readouterr()
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(_cli.BENCH_SHAPES)
    assert all(float(row.split("|")[3].replace(",", "")) > 0 for row in rows[1:])
    assert f"{len(_cli.BENCH_SHAPES)}/{len(_cli.BENCH_SHAPES)}" in err  # the progress bar reached the end


def test_command_line_errors():
    with pytest.raises(SystemExit) as exit_info:
        _cli.main(["compile"])
    assert exit_info.value.code == 2
