#!/usr/bin/env bash
# The frame and summary tests under pandas 2 (pyproject allows pandas>=2.0; the development
# machines and the main CI run have pandas 3, where dfanalyzer/schema.py builds frames from
# pandas blocks: on pandas 2 it takes the plain constructor and other fallbacks, run only here).
#
#   bash scripts/test_pandas2.sh [extra pytest args]
#
# Makes a plain virtual environment (not --system-site-packages: that would see pandas 3) in
# $PANDAS2_VENV (default build/venv-pandas2, reused when it exists), installs pyproject's runtime
# dependencies from PyPI with pandas at $PANDAS2_SPEC (default: the lowest allowed minor, 2.0.x,
# with the NumPy 1 and pyarrow that it needs) plus pytest, and runs the tests below against the
# dftracer package already installed for $PYTHON (pip install ".[test]", as scripts/test.sh does):
# a folder holding links to its dftracer/ and dfanalyzer/ goes first on PYTHONPATH, so the compiled
# modules are those of that install (same interpreter, same ABI) and nothing is built again.
# PANDAS2_PKG_ROOT=DIR takes the packages from DIR instead (a development tree built in place,
# DFTRACER_DEV_INPLACE=ON: PANDAS2_PKG_ROOT=$PWD).
# About 1-2 min of downloads and 2 min of tests; called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${PANDAS2_VENV:-build/venv-pandas2}
read -r -a SPEC <<<"${PANDAS2_SPEC:-pandas==2.0.* numpy<2 pyarrow<21}"
TESTS=(
  tests/test_reader_frame_build.py  # frame_of_columns, categorical(): the pandas < 3 fallbacks
  tests/test_reader_columns.py      # every column and dtype of the loader's frames
  tests/test_reader_projection.py   # events frame and streamed summary, with and without projection
  tests/test_summary_chunks.py      # the threaded summary against its JSON truth
  tests/test_analyzer_small_files.py  # events held on a Dask cluster: totals and grouped files
)

# the installed package (PYTHONSAFEPATH: not the source tree, which has no compiled modules)
site=${PANDAS2_PKG_ROOT:-$(PYTHONSAFEPATH=1 "$PY" -c 'import os, dfanalyzer; print(os.path.dirname(os.path.dirname(dfanalyzer.__file__)))')}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
# pyproject's runtime dependencies, except the ones pinned by the spec
mapfile -t deps < <("$PY" - "${SPEC[@]}" <<'EOF'
import re, sys
try:
    import tomllib
except ImportError:  # Python < 3.11: the copy pip carries
    from pip._vendor import tomli as tomllib
pinned = {re.match(r"[A-Za-z0-9_.-]+", s).group(0).lower() for s in sys.argv[1:]}
for d in tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]:
    if re.match(r"[A-Za-z0-9_.-]+", d).group(0).lower() not in pinned:
        print(d)
EOF
)
"$VENV/bin/python" -m pip install -q "${deps[@]}" "${SPEC[@]}" "pytest>=7"
pkgs=$(mktemp -d)
trap 'rm -rf "$pkgs"' EXIT
ln -s "$(cd "$site" && pwd)/dftracer" "$(cd "$site" && pwd)/dfanalyzer" "$pkgs/"
"$VENV/bin/python" -c 'import pandas, numpy; print(f"test_pandas2.sh: pandas {pandas.__version__}, numpy {numpy.__version__}")'
PYTHONSAFEPATH=1 PYTHONPATH="$pkgs" "$VENV/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]}" "$@"
