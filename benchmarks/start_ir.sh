#!/bin/bash
# Callgrind instruction counts (Ir, all threads; deterministic) of the threaded summary's
# start-up phases, per tree (docs/perf/i28-boot.md):
#
#   benchmarks/start_ir.sh "summary FILE --json --workers 2 --index-dir IDX" ROOT...
#
# For each ROOT (PYTHONPATH=ROOT, PYTHONSAFEPATH=1, PYTHONHASHSEED=0, byte code written by a warm
# run first): the interpreter (python -c pass), + `from dfanalyzer import _reader; import
# dfanalyzer.cli`, + `import dfanalyzer.analyzer`, and the command up to its first load
# (`_reader.Prefetch` replaced by one that `os._exit`s). Prints the cumulative counts.
set -euo pipefail
cmd=$1
shift
py=$(python3 -c 'import sys; print(sys.executable)')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export START_IR_ARGS=$cmd
cat >"$tmp/to_first_load.py" <<'PROBE'
import os, shlex, sys
from dfanalyzer import _reader
def _stop(work, threads):
    os._exit(0)
_reader.Prefetch = _stop
from dfanalyzer import cli
sys.exit(cli.main(shlex.split(os.environ["START_IR_ARGS"])))
PROBE
ir() {
  local root=$1
  shift
  (cd / && env -u PYTHONDONTWRITEBYTECODE PYTHONHASHSEED=0 PYTHONPATH="$root" PYTHONSAFEPATH=1 \
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$py" "$@" >/dev/null 2>&1) || true
  grep -m1 '^totals:' "$tmp/cg.out" | awk '{print $2}'
}
for root in "$@"; do
  (cd / && env -u PYTHONDONTWRITEBYTECODE PYTHONPATH="$root" PYTHONSAFEPATH=1 "$py" "$tmp/to_first_load.py" >/dev/null 2>&1) || true
  a=$(ir "$root" -c pass)
  b=$(ir "$root" -c 'from dfanalyzer import _reader; import dfanalyzer.cli')
  c=$(ir "$root" -c 'from dfanalyzer import _reader; import dfanalyzer.cli, dfanalyzer.analyzer')
  d=$(ir "$root" "$tmp/to_first_load.py")
  echo "$root interpreter=$a +cli=$b +analyzer=$c first_load=$d"
done
