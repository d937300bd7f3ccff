#!/usr/bin/env bash
# Second quick-start command: installs the test dependencies and runs every test
# (CTest for the C++ parts, pytest for Python, including the slow end-to-end tests, and the frame
# and summary tests again under pandas 2: scripts/test_pandas2.sh).
# Usage: bash scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

bash scripts/system_deps.sh test
"$PY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
"$PY" -m pip install -q ".[test]"
if [ -f scripts/install_dlio_deps.sh ]; then
  bash scripts/install_dlio_deps.sh
fi

# Style: clang-format and ruff (scripts/lint.sh; `bash scripts/lint.sh --fix` rewrites the files).
# A difference fails the run at the end, after the tests.
lint_rc=0
PYTHON="$PY" bash scripts/lint.sh || lint_rc=$?

# C++ tests: a plain CMake build (no pip), as users without pip would do.
cmake -S . -B build/ctest -DCMAKE_BUILD_TYPE=Release -DDFTRACER_BUILD_TESTS=ON >/dev/null
cmake --build build/ctest -j"$(nproc)"
ctest --test-dir build/ctest --output-on-failure -j"$(nproc)"

# Link mode on each supported toolchain (docs/platforms.md): the core and the preload built with
# g++ 11, g++ 12 and clang, static libstdc++ ON and OFF, each link-checked and run under.
bash scripts/toolchain_matrix.sh

# Python tests run against the installed package: PYTHONSAFEPATH keeps the source tree
# (which has no compiled modules) off sys.path, here and in every subprocess.
export PYTHONSAFEPATH=1
# libFuzzer runs (tests/test_reader_fuzz.py): fixed seed and input count per target, deterministic.
export DFTRACER_FUZZ_SCALE=${DFTRACER_FUZZ_SCALE:-1}  # fixed seed and input count: deterministic
"$PY" -m pytest tests -ra "$@"
# pandas 2 (pyproject allows pandas>=2.0; the run above has the pandas 3 that pip chose): the frame
# and summary tests again in a plain venv with pandas 2.0.x from PyPI, against the compiled modules
# installed above (docs/testing.md; about 3 minutes)
PYTHON="$PY" bash scripts/test_pandas2.sh
if [ "$lint_rc" -ne 0 ]; then
  echo "test.sh: tests done, but scripts/lint.sh failed (exit $lint_rc): see its output above" >&2
  exit "$lint_rc"
fi
