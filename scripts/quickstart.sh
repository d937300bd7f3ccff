#!/usr/bin/env bash
# First quick-start command: installs everything, traces a small bundled example program,
# and summarizes it and the bundled real DFTracer traces with an embedded local Dask cluster.
# Usage: bash scripts/quickstart.sh [OUTDIR]      (default results/quickstart)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${1:-results/quickstart}

bash scripts/system_deps.sh build
"$PY" -m pip install -q .

rm -rf "$OUT" && mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
echo "== Tracing scripts/example_app.py (Python API + LD_PRELOAD POSIX/STDIO, forked workers)"
# Run from OUT so that the source tree (without compiled modules) does not shadow the install.
(cd "$OUT" && dftracer-run --log-file "$OUT/traces/example" --data-dir "$OUT/data" --metadata -- \
   "$PY" "$OLDPWD/scripts/example_app.py" "$OUT/data")

echo "== What it recorded"
dftracer-index "$OUT"/traces/*.pfw.gz
echo "-- first lines of one trace:"
first=$(ls "$OUT"/traces/*.pfw.gz | head -n 1)
dftracer-cat "$first" --lines 1:6 | cut -c1-200

echo "== dfanalyzer summary of the trace just recorded"
dfanalyzer summary "$OUT/traces/*.pfw.gz" --plot "$OUT/plots"

echo "== dfanalyzer summary of the bundled CM1 traces (DFTracer v1.0.5, 48 processes)"
dfanalyzer summary "tests/data/dftracer-v1.0.5-cm1/*.pfw.gz" --local-cluster   # on the embedded local Dask cluster
echo "Plots of the example run: $OUT/plots"
