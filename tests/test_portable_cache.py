"""Caches that travel (issue 23): a cache filled by one install serves another install of the same
sources at another path, kernels compile for the geometry's x86-64 level, and the command line's
``warmup`` verb."""

import os
import platform
import shutil
import stat
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import pytest

import fastgru
from fastgru import _cli, _config, _isa, _warmup

_CELL = textwrap.dedent("""
    import numpy as np, fastgru
    from fastgru import _config
    rng = np.random.default_rng(0)
    h = fastgru.gru_cell(rng.standard_normal((3, 4), dtype=np.float32), np.zeros((3, 5), np.float32),
                         rng.standard_normal((15, 4), dtype=np.float32), rng.standard_normal((15, 5), dtype=np.float32))
    loaded, compiled = _config.compile_counts()
    print(h.tobytes().hex(), loaded, compiled, _config.cached_counts()[0], fastgru.__file__)
""")


def _run(code, root, cache, **env):
    """``code`` in a fresh process that imports fastgru from ``root`` with FASTGRU_CACHE_DIR ``cache``."""
    env = {**os.environ, "PYTHONPATH": str(root), "FASTGRU_CACHE_DIR": str(cache), **env}
    done = subprocess.run(  # in root: ``-c`` puts the working folder first on the path
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def _install(at):
    """A copy of fastgru's package (sources only) under ``at``, as a second install of this version."""
    shutil.copytree(os.path.dirname(fastgru.__file__), at / "fastgru", ignore=shutil.ignore_patterns("__pycache__"))
    return at


def test_a_moved_install_loads_a_moved_cache_without_compiling(tmp_path):
    """One small path (a float32 cell) compiles into a cache from one install; the cache and the
    package, both copied elsewhere, then run it without a single compilation."""
    built = _run(_CELL, _install(tmp_path / "build"), tmp_path / "cache")
    assert int(built[2]) > 0 and built[4].startswith(str(tmp_path / "build"))  # it compiled
    shutil.copytree(tmp_path / "cache", tmp_path / "image-cache")
    moved = _run(_CELL, _install(tmp_path / "deploy"), tmp_path / "image-cache")
    checksum, loaded, compiled, cached, where = moved
    assert where.startswith(str(tmp_path / "deploy"))  # the other install ran
    assert checksum == built[0]
    assert int(loaded) > 0 and compiled == "0"
    assert int(cached) == int(built[3]) > 0  # the cache folder holds the build's kernels for this target
    if _isa.CPU_MODE == "portable":  # another CPU model of the same level (as LLVM names the host) loads them too
        haswell = 'import llvmlite.binding as b; b.get_host_cpu_name = lambda: "haswell"\n'
        assert _run(haswell + _CELL, tmp_path / "deploy", tmp_path / "image-cache")[1:3] == [loaded, "0"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_cache_folder_serves_its_kernels(tmp_path):
    _run(_CELL, _install(tmp_path / "build"), tmp_path / "cache")
    for folder, _, _ in os.walk(tmp_path / "cache"):
        os.chmod(folder, stat.S_IRUSR | stat.S_IXUSR)
    try:
        _, loaded, compiled, _, _ = _run(_CELL, tmp_path / "build", tmp_path / "cache")
    finally:
        for folder, _, _ in os.walk(tmp_path / "cache"):
            os.chmod(folder, stat.S_IRWXU)
    assert int(loaded) > 0 and compiled == "0"


def test_the_cache_folder_is_named_after_the_package_not_its_path(monkeypatch, tmp_path):
    monkeypatch.setattr(_config, "CACHE_DIR", str(tmp_path))
    from fastgru._kernels import rows

    folder = _config._PackageLocator(rows.run_serial, rows.__file__, str(tmp_path / "root")).get_cache_path()
    assert folder == str(tmp_path / "root" / "fastgru" / "_kernels")


_TARGET = "from fastgru import _isa; from numba.core import registry; " + (
    "print(_isa.TARGET_CPU, _isa.CPU_MODE, registry.cpu_target.target_context.codegen().magic_tuple()[1:])"
)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 levels")
def test_kernels_compile_for_the_geometry_level_unless_asked_for_the_host():
    level = _isa.portable_cpu(_isa.GEOMETRY.name, llvm.get_host_cpu_features())
    if level is None:
        pytest.skip("this CPU lacks a feature of its geometry's x86-64 level")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
    done = subprocess.run(
        [sys.executable, "-c", _TARGET], env={**env, "FASTGRU_CPU": "portable"}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [level[0], "portable", f"('{level[0]}',", f"'{level[1]}')"]  # Numba's cache key
    done = subprocess.run(
        [sys.executable, "-c", _TARGET], env={**env, "FASTGRU_CPU": "host"}, capture_output=True, text=True
    )
    assert done.stdout.split()[:2] == [llvm.get_host_cpu_name(), "host"]


def test_portable_levels():
    zen3 = dict.fromkeys(_isa.PORTABLE["avx2"][0][1], True)
    assert _isa.portable_cpu("avx2", zen3) == ("x86-64-v3", "")
    assert _isa.portable_cpu("avx512", zen3) is None
    assert _isa.portable_cpu("generic", zen3) == ("x86-64-v2", "")
    assert _isa.portable_cpu("avx2", {**zen3, "movbe": False}) is None  # never code that a CPU cannot run
    assert _isa.portable_cpu("generic", {}) == ("x86-64", "")
    zen4 = dict.fromkeys(_isa.PORTABLE["avx512"][0][1], True)
    assert _isa.portable_cpu("avx512", zen4) == ("x86-64-v4", "-prefer-256-bit")
    for levels in _isa.PORTABLE.values():
        for name, _, features in levels:
            assert _isa._probe(name, features) == _isa.level_features(name), name
    assert _isa.level_features("x86-64-v4") == {"avx512f", "avx2", "fma"}


def test_unknown_cpu_mode_is_an_error_at_import():
    env = {**os.environ, "FASTGRU_CPU": "native"}
    done = subprocess.run([sys.executable, "-c", "import fastgru"], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "FASTGRU_CPU is 'native'; expected auto, portable or host" in done.stderr


def test_warmup_command(monkeypatch, capsys, tmp_path):
    """The verb's wiring: the folder, the steps with a progress bar, the kernels' origin (the steps
    themselves are warmup's, tested in test_cold_start.py)."""
    ran = []
    monkeypatch.setattr(_config, "use_cache_dir", lambda folder: ran.append(folder))
    monkeypatch.setattr(
        _warmup,
        "steps",
        lambda dtypes, ops, weights: [(f"{d} {o}", lambda: ran.append("step")) for d in dtypes for o in ops],
    )
    assert _cli.main(["warmup", "--cache-dir", str(tmp_path), "--dtypes", "float64", "--ops", "gru_cell"]) == 0
    assert ran == [str(tmp_path), "step"]
    out, err = capsys.readouterr()
    assert "1/1" in err and "float64 gru_cell" in err
    assert "loaded from the cache and" in out


def test_warmup_command_errors(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exit_info:
        _cli.main(["warmup", "--cache-dir", str(blocker / "cache")])
    assert exit_info.value.code == 2
    assert "cannot be made or written" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _cli.main(["warmup", "--dtypes", "int8"])
    assert "warmup: dtypes has 'int8'" in capsys.readouterr().err


def _twice(x):
    return 2 * x


def test_a_cache_folder_that_cannot_be_written_is_read(monkeypatch, tmp_path):
    """In process, for root too (the subprocess test above skips as root): the folder is taken, and
    a kernel that cannot be saved into it runs from memory."""
    (tmp_path / _config.CACHE_TAG).mkdir()
    monkeypatch.setattr(_config, "CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_config, "_writable", lambda folder: False)
    assert _config.cache_root() == str(tmp_path / _config.CACHE_TAG)
    monkeypatch.setattr(_config, "_writable", lambda folder: True)
    twice = _config.kernel()(_twice)

    def refuse(self):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(_config._PackageLocator, "ensure_cache_path", refuse)
    assert twice(21) == 42
    assert _config.cache_folder(twice).startswith(str(tmp_path / _config.CACHE_TAG))
    assert not any(name.endswith(".nbc") for _, _, names in os.walk(tmp_path) for name in names)


def test_warmup_command_jobs(monkeypatch, capsys, tmp_path):
    """--jobs 2: two processes compile every other step into the folder; then this one runs every
    step (loading them); a process of --jobs runs the steps of --steps."""
    commands = []

    class Process:
        returncode = 0

        def __init__(self, command, env, **kwargs):
            commands.append((command, env["FASTGRU_CACHE_DIR"]))

        def communicate(self):
            return "", ""

    ran = []
    monkeypatch.setattr(subprocess, "Popen", Process)
    monkeypatch.setattr(_config, "use_cache_dir", lambda folder: monkeypatch.setattr(_config, "CACHE_DIR", folder))
    monkeypatch.setattr(_config, "cache_root", lambda: str(tmp_path))
    monkeypatch.setattr(
        _warmup, "steps", lambda dtypes, ops, weights: [(str(i), lambda i=i: ran.append(i)) for i in range(5)]
    )
    assert _cli.main(["warmup", "--cache-dir", str(tmp_path), "--jobs", "2", "--ops", "gru_cell"]) == 0
    assert [command[-1] for command, _ in commands] == ["0,2,4", "1,3"]
    assert commands[0][0][-8:-1] == ["--dtypes", "float32", "--ops", "gru_cell", "--weight-dtypes", "exact", "--steps"]
    assert {folder for _, folder in commands} == {str(tmp_path)}
    assert ran == [0, 1, 2, 3, 4]
    assert "compiled in 2 processes" in capsys.readouterr().err
    ran.clear()
    assert _cli.main(["warmup", "--steps", "1,3"]) == 0
    assert ran == [1, 3]
