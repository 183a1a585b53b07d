#!/usr/bin/env bash
# CI's aarch64 step (docs/guide/platforms.md): fastgru's platform tests on aarch64, emulated on this
# x86-64 host by qemu-user, in an aarch64 Python made from Debian's and PyPI's packages only:
#   - Debian's qemu-user on the host (apt-get install, as root);
#   - Debian bookworm's arm64 python3.11 and the libraries it loads (apt-get download PKG:arm64
#     after dpkg --add-architecture arm64), unpacked with dpkg -x into ROOT;
#   - numpy, numba and llvmlite's aarch64 wheels and pytest's pure ones (pip download), unzipped
#     into SITE;
# then qemu-aarch64 -L ROOT ROOT/usr/bin/python3.11 -m pytest on the subset below.
#
# The set-up is kept in ${FASTGRU_CI_CACHE:-$HOME/.cache/fastgru-ci}/aarch64/<key>, the key a digest
# of the package lists and versions pinned here: a later run with the same key downloads nothing.
# The kernels compiled under emulation (a minute or more each) are kept beside it
# (FASTGRU_CACHE_DIR). Any failure of the set-up or of the tests exits non-zero, saying where: CI
# never skips this step.
set -euo pipefail
trap 'echo "CI aarch64: failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
repo="$(pwd)"

# The aarch64 Python: the interpreter, its standard library and the shared libraries they,
# numpy's and llvmlite's extensions load (libgomp1 is left out: Numba then runs its workqueue
# layer, what an aarch64 machine without the system's OpenMP runtime gets).
debs=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libc6 libgcc-s1 libstdc++6 zlib1g
    libexpat1 libffi8 libbz2-1.0 liblzma5 libssl3 libuuid1 libsqlite3-0 libcrypt1 libtinfo6 libncursesw6
    libreadline8 libnsl2 libtirpc3 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1
    libcom-err2 libdb5.3)
# fastgru's run-time dependencies as the benchmarks pin them, and pytest with its own.
wheels=(numpy==2.4.6 numba==0.68.1 llvmlite==0.50.0 pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1
    packaging==26.3 pygments==2.21.0)
# The subset: every op, float32 and float64, every kernel path (the partner thread's included),
# ragged lengths, both directions, AUGRU, streams and the state pool, against x86-64's bits; and
# packing the weights, whose blocks NEON transposes in 4 (float32) or 2 (float64) lanes.
tests=(tests/test_platform_bits.py tests/test_packing.py)
partner_tests="cell_of_256 or takes_half or sleeping_partner or sequence_row or stream_of_one_row"

base="${FASTGRU_CI_CACHE:-$HOME/.cache/fastgru-ci}/aarch64"
key="$(printf '%s\n' bookworm "${debs[@]}" "${wheels[@]}" | sha256sum | cut -c1-12)"
setup="$base/$key"
root="$setup/root"
site="$setup/site"
start=$SECONDS

fail() {
    echo "CI aarch64: $*" >&2
    exit 1
}

install_qemu() {
    command -v qemu-aarch64 > /dev/null && return
    [ "$(id -u)" = 0 ] || fail "qemu-aarch64 is missing and installing Debian's qemu-user needs root"
    echo "CI aarch64: installing Debian's qemu-user"
    apt-get update -qq || fail "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user > /dev/null || fail "apt-get install qemu-user failed"
    command -v qemu-aarch64 > /dev/null || fail "qemu-user is installed but qemu-aarch64 is not on PATH"
}

build_setup() {
    # Built in a temporary folder and renamed into place: an interrupted run leaves no half set-up.
    local tmp
    mkdir -p "$base"
    tmp="$(mktemp -d "$base/.building.XXXXXX")"
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        [ "$(id -u)" = 0 ] || fail "dpkg --add-architecture arm64 needs root"
        dpkg --add-architecture arm64
    fi
    apt-get update -qq || fail "apt-get update (with arm64) failed"
    mkdir -p "$tmp/debs" "$tmp/root" "$tmp/wheels" "$tmp/site"
    (cd "$tmp/debs" && apt-get download -qq "${debs[@]/%/:arm64}") || fail "apt-get download of the arm64 packages failed"
    for deb in "$tmp"/debs/*.deb; do
        dpkg -x "$deb" "$tmp/root" || fail "dpkg -x $deb failed"
    done
    python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_aarch64 \
        --python-version 3.11 --implementation cp --abi cp311 -d "$tmp/wheels" "${wheels[@]}" ||
        fail "pip download of the aarch64 wheels failed"
    for wheel in "$tmp"/wheels/*.whl; do
        python3 -m zipfile -e "$wheel" "$tmp/site" || fail "unzipping $wheel failed"
    done
    {
        echo "# the aarch64 set-up of .ci/aarch64.sh, key $key, made $(date -u +%FT%TZ)"
        for deb in "$tmp"/debs/*.deb; do dpkg-deb -f "$deb" Package Version | paste -sd' '; done
        (cd "$tmp/wheels" && ls -1 -- *.whl)
    } > "$tmp/manifest.txt"
    rm -rf "$tmp/debs" "$tmp/wheels"
    PYTHONPATH="$tmp/site" qemu-aarch64 -L "$tmp/root" "$tmp/root/usr/bin/python3.11" -c "import numba, numpy, pytest" ||
        fail "the emulated Python cannot import numba, numpy and pytest"
    # the set-ups of other keys (other versions) go
    find "$base" -mindepth 1 -maxdepth 1 -not -name "$(basename "$tmp")" -not -name kernels -exec rm -rf {} +
    mv "$tmp" "$setup"
}

install_qemu
if [ -f "$setup/manifest.txt" ]; then
    echo "CI aarch64: the set-up $setup is cached"
    made=cached
else
    made=made
    echo "CI aarch64: making the set-up $setup"
    build_setup
fi
setup_seconds=$((SECONDS - start))

# Compiled kernels persist across runs; fastgru keys them by geometry and sources, Numba by its
# version and the CPU. The three newest source versions are kept.
kernels="$base/kernels"
mkdir -p "$kernels"
find "$kernels" -mindepth 1 -maxdepth 1 -name 'numba-*' -printf '%T@ %p\n' | sort -rn | tail -n +4 | cut -d' ' -f2- |
    xargs -r rm -rf

python=(qemu-aarch64 -L "$root" "$root/usr/bin/python3.11")
export FASTGRU_CACHE_DIR="$kernels" PYTHONPATH="$repo:$site"
# FASTGRU_REQUIRE names no package here: this Python has numba, numpy and pytest only.
unset FASTGRU_REQUIRE
info="$("${python[@]}" -m fastgru info)" || fail "python -m fastgru info failed under emulation"
echo "$info"
grep -q '^geometry: *generic ' <<< "$info" || fail "the emulated fastgru does not run the generic geometry"
grep -q '^partner thread: *spins ' <<< "$info" || fail "the partner thread is off on aarch64"
# the compiled kernels the cache folder of these sources holds before this run
compiled="$(sed -n 's/^cache folder: .*(\([0-9]*\) compiled kernels)$/\1/p' <<< "$info")"
test_start=$SECONDS
# The kernels the tests run, compiled (or loaded) first in two processes at once: Numba's compiler
# keeps one core busy, and under emulation each kernel takes a minute or more to compile. The
# emulated Python cannot start aarch64 subprocesses itself (no binfmt_misc), so this shell does.
steps="$("${python[@]}" -c 'from fastgru import _warmup; print(len(_warmup.steps(("float32", "float64"))))')" ||
    fail "fastgru's warmup steps cannot be listed under emulation"
warmup=(-m fastgru warmup --dtypes float32 float64 --steps)
"${python[@]}" "${warmup[@]}" "$(seq -s, 0 2 $((steps - 1)))" > "$base/warmup0.log" 2>&1 &
even=$!
"${python[@]}" "${warmup[@]}" "$(seq -s, 1 2 $((steps - 1)))" > "$base/warmup1.log" 2>&1 ||
    fail "fastgru warmup failed under emulation: $(tail -5 "$base/warmup1.log")"
wait "$even" || fail "fastgru warmup failed under emulation: $(tail -5 "$base/warmup0.log")"
echo "CI aarch64: kernels compiled or loaded in $((SECONDS - test_start)) s: $(grep '^kernels:' "$base"/warmup?.log | cut -d: -f3- | paste -sd';')"
"${python[@]}" -m pytest -p no:cacheprovider -q "${tests[@]}" || fail "the aarch64 tests failed"
# The function API's calls of one row and one step (the direct driver, which packs each panel in
# NEON's lanes as it goes) against the prepared ops' bits.
"${python[@]}" -m pytest -p no:cacheprovider -q tests/test_direct.py -k "not float16" ||
    fail "the direct-call tests failed on aarch64"
# Stacks of layers (GRUStack): their layers run the drivers through C callbacks; the one-row case
# of float32 takes each driver (serial, parallel, split, pair), against the layers one by one.
"${python[@]}" -m pytest -p no:cacheprovider -q tests/test_stack.py -k "one_row and float32" ||
    fail "the stack tests failed on aarch64"
# The partner thread's own tests that run in one process (the others start Python subprocesses,
# which the emulated Python cannot: no binfmt_misc here), with a spin of 20 ms: emulated Python
# runs a burst of calls (which wakes the partner) far slower than the 1 ms spin of the default.
FASTGRU_SPIN_US=20000 "${python[@]}" -m pytest -p no:cacheprovider -q tests/test_partner.py -k "${partner_tests}" ||
    fail "the partner thread's tests failed on aarch64"
test_seconds=$((SECONDS - test_start))
echo "CI aarch64: set-up ${setup_seconds} s, tests ${test_seconds} s, in all $((SECONDS - start)) s"
# FASTGRU_CI_RECORD=FILE: a row of benchmarks/results/zen3-avx2/aarch64_ci_results.md's table for this run
if [ -n "${FASTGRU_CI_RECORD:-}" ]; then
    cpu="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    printf '| %s | %s | %s (%s kernel files before) | %s | %s | %s | %s, %s cores, %s |\n' "$(date -u +%F)" \
        "$made" "$([ "$compiled" = 0 ] && echo compiled || echo cached)" "$compiled" "$setup_seconds" \
        "$test_seconds" "$((SECONDS - start))" "$cpu" "$(nproc)" "$(qemu-aarch64 --version | head -1)" >> "$FASTGRU_CI_RECORD"
fi
