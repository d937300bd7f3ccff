#!/usr/bin/env bash
# Toolchain matrix of the link mode (docs/design.md, "Link mode"; docs/platforms.md): builds only
# the core and the preload library with each compiler x DFTRACER_STATIC_LIBSTDCXX=ON/OFF, then
# for each build
#   - scripts/check_link.py on the core, the YAML reader and the preload (also run by the build
#     itself, POST_BUILD) and the twin-vs-core comparison,
#   - /bin/true and `python3 -c ...` (reads a file) under LD_PRELOAD of that preload, with the
#     libraries laid out as installed (core next to the preload): exit 0, nothing on stderr, and
#     for Python a trace file holding the read of that file.
# Usage: bash scripts/toolchain_matrix.sh [COMPILER...]   (default: g++-11 g++-12 clang++)
#   A compiler that is not installed fails the run (scripts/system_deps.sh test installs them);
#   TOOLCHAIN_MATRIX_ALLOW_MISSING=1 skips it with a message instead.
#   Build trees: build/toolchain-matrix/<compiler>-<ON|OFF> (kept: a rerun rebuilds incrementally).
set -euo pipefail
cd "$(dirname "$0")/.."
# The interpreter itself (not a pyenv-style wrapper script): the program run under the preload.
PY=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')
JOBS=${JOBS:-$(nproc)}
compilers=("$@")
[ ${#compilers[@]} -eq 0 ] && compilers=(g++-11 g++-12 clang++)

c_compiler_for() {  # the C compiler of the same toolchain (CMake wants both)
  case "$1" in
    g++*) echo "${1/g++/gcc}" ;;
    clang++*) echo "${1/clang++/clang}" ;;
    *) echo cc ;;
  esac
}

mkdir -p build/toolchain-matrix
# With ccache the OFF build of a compiler reuses the ON build's objects (only fenv.cpp differs).
launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_DIR=${CCACHE_DIR:-$PWD/build/toolchain-matrix/ccache}
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
results=()
failed=0
start_all=$SECONDS
for cxx in "${compilers[@]}"; do
  if ! command -v "$cxx" >/dev/null; then
    if [ "${TOOLCHAIN_MATRIX_ALLOW_MISSING:-0}" = 1 ]; then
      echo "toolchain_matrix: $cxx not installed, skipped"
      results+=("$cxx: not installed (skipped)")
      continue
    fi
    echo "toolchain_matrix: $cxx not installed (bash scripts/system_deps.sh test)" >&2
    exit 2
  fi
  cc=$(c_compiler_for "$cxx")
  for mode in ON OFF; do
    name="$cxx-$mode"
    dir="$PWD/build/toolchain-matrix/$name"
    t0=$SECONDS
    echo "=== toolchain_matrix: $name ($("$cxx" --version | head -1))"
    if ! cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
      -DDFTRACER_STATIC_LIBSTDCXX="$mode" -DDFTRACER_BUILD_PYTHON=OFF -DDFTRACER_BUILD_TESTS=OFF "${launcher[@]}" \
      >"$dir.configure.log" 2>&1; then
      tail -20 "$dir.configure.log" >&2
      results+=("$name: FAILED (configure, $dir.configure.log)")
      failed=1
      continue
    fi
    # The build runs check_link.py after each link (POST_BUILD): a bad library fails here.
    if ! cmake --build "$dir" --target dftracer_preload dftracer_core -j"$JOBS" >"$dir.build.log" 2>&1; then
      tail -30 "$dir.build.log" >&2
      results+=("$name: FAILED (build or link check, $dir.build.log)")
      failed=1
      continue
    fi
    # Installed layout: the preload's DT_NEEDED is "$ORIGIN/libdftracer_core.so".
    stage="$dir/stage"
    rm -rf "$stage" && mkdir -p "$stage"
    cp "$dir/src/core/libdftracer_core.so" "$dir/src/core/libdftracer_yaml.so" \
      "$dir/src/preload/libdftracer_preload.so" "$stage/"
    if ! "$PY" scripts/check_link.py "$stage/libdftracer_preload.so" "$stage/libdftracer_core.so" \
      "$stage/libdftracer_yaml.so" --twin "$dir/src/core/origin_link/libdftracer_core_origin.so" \
      "$stage/libdftracer_core.so"; then
      results+=("$name: FAILED (check_link.py)")
      failed=1
      continue
    fi
    needed=$(readelf -dW "$stage/libdftracer_preload.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    # The static mode's point: no shared C++ runtime, unwinder or libm in a traced process.
    core_needed=$(readelf -dW "$stage/libdftracer_core.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    if [ "$mode" = ON ] && grep -qE 'libstdc\+\+|libgcc_s|libm\.' <<<"$needed $core_needed"; then
      echo "toolchain_matrix: $name: static mode, yet NEEDED preload: $needed, core: $core_needed" >&2
      results+=("$name: FAILED (shared C++ runtime in static mode)")
      failed=1
      continue
    fi
    # Under the preload: exit 0 and an empty stderr (a "symbol lookup error" is exit 127).
    trace="$dir/trace"
    rm -rf "$trace" && mkdir -p "$trace"
    printf 'toolchain matrix\n' >"$trace/input.txt"
    run_ok=1
    run_traced() {  # run_traced CMD...: exit 0 and an empty stderr under the preload, else run_ok=0
      local rc=0
      out=$(env -u PYTHONPATH LD_PRELOAD="$stage/libdftracer_preload.so" DFTRACER_ENABLE=1 DFTRACER_INIT=PRELOAD \
        DFTRACER_LOG_FILE="$trace/t" DFTRACER_DATA_DIR="$trace" DFTRACER_TRACE_COMPRESSION=0 \
        "$@" 2>"$trace/stderr.txt") || rc=$?
      if [ "$rc" -ne 0 ] || [ -s "$trace/stderr.txt" ]; then
        echo "toolchain_matrix: $name: '$1' under the preload: exit $rc, stderr:" >&2
        cat "$trace/stderr.txt" >&2
        run_ok=0
      fi
    }
    run_traced /bin/true
    run_traced "$PY" -c 'import sys; sys.stdout.write(open(sys.argv[1]).read())' "$trace/input.txt"
    if [ "$out" != "toolchain matrix" ]; then  # the Python run's output
      echo "toolchain_matrix: $name: python printed '$out'" >&2
      run_ok=0
    fi
    # The Python run read input.txt: its trace file names it.
    if ! grep -qs "input.txt" "$trace"/t*.pfw; then
      echo "toolchain_matrix: $name: no trace file with the read of input.txt under $trace" >&2
      ls -l "$trace" >&2
      run_ok=0
    fi
    if [ "$run_ok" -ne 1 ]; then
      results+=("$name: FAILED (run under the preload)")
      failed=1
      continue
    fi
    results+=("$name: ok in $((SECONDS - t0)) s (preload NEEDED: $needed)")
  done
done
echo "=== toolchain_matrix: ${#compilers[@]} compilers x static libstdc++ ON/OFF, $((SECONDS - start_all)) s"
printf '  %s\n' "${results[@]}"
exit "$failed"
