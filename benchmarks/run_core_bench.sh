#!/usr/bin/env bash
# Tracer core benchmark (results: docs/perf/core.md).
# Usage: benchmarks/run_core_bench.sh [events_per_mode] [io_events] [reps]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build/core-bench"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DDFTRACER_BUILD_TESTS=OFF -DDFTRACER_BUILD_PYTHON=OFF >/dev/null
cmake --build "$build" -j2 --target bench_core >/dev/null
echo "# machine: $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/src/core/bench_core" "${1:-500000}" "${2:-500000}" /tmp/dft_bench_$$ "${3:-3}"
# Reference: bytes per line of the DFTracer v1.0.5 fixture traces (real cm1 run, hashed format).
fx="$root/tests/data/dftracer-v1.0.5-cm1"
if [ -d "$fx" ]; then
  bytes=$(cat "$fx"/*.pfw.gz | wc -c)
  lines=$(zcat "$fx"/*.pfw.gz | wc -l)
  echo
  echo "# Reference: DFTracer v1.0.5 fixture: $bytes bytes / $lines lines = $(awk "BEGIN{printf \"%.2f\", $bytes/$lines}") bytes/line"
fi
