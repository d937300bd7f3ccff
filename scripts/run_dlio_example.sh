#!/usr/bin/env bash
# DLIO benchmark end to end, traced by dftracer and summarized by DFAnalyzer (issue 6).
#
# Usage: bash scripts/run_dlio_example.sh [OUTDIR]        (default results/dlio)
# Run after the README's first command (scripts/quickstart.sh), which pip-installs dftracer.
# Leaves: OUTDIR/data/ (dataset), OUTDIR/output/ (DLIO output + traces *.pfw.gz),
#         OUTDIR/summary.txt, OUTDIR/summary.json, OUTDIR/*.png, OUTDIR/train.log (DLIO's log),
#         OUTDIR/overhead/ + OUTDIR/overhead.txt (DLIO's throughput untraced vs traced, same session).
# Environment knobs (defaults = the documented run): DLIO_FILES=32 DLIO_RECORD_LENGTH=4194304
#   DLIO_EPOCHS=2 DLIO_READ_THREADS=2 DLIO_BATCH=2 DLIO_COMPUTE=0.05 DLIO_MP_CONTEXT=fork
#   DLIO_REPEAT=3 (untraced/traced pairs for the overhead; 0 = one traced run only),
#   DLIO_SKIP_INSTALL=1 (skip install_dlio_deps.sh), DLIO_VENV=DIR (default build/dlio-venv: the
#   venv install_dlio_deps.sh fills and everything below runs in: DLIO, pydftracer, our wheel),
#   DFTRACER_DEV_TREE=DIR (use a source tree's in-place build instead of the installed package).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
PY=$("$PY" -c 'import sys; print(sys.executable)')   # the real interpreter, not a pyenv shim
OUT=${1:-results/dlio}
FILES=${DLIO_FILES:-32}
RECLEN=${DLIO_RECORD_LENGTH:-4194304}
EPOCHS=${DLIO_EPOCHS:-2}
THREADS=${DLIO_READ_THREADS:-2}
BATCH=${DLIO_BATCH:-2}
COMPUTE=${DLIO_COMPUTE:-0.05}
MPCTX=${DLIO_MP_CONTEXT:-fork}
T0=$(date +%s)

VENV=${DLIO_VENV:-$ROOT/build/dlio-venv}
if [ "${DLIO_SKIP_INSTALL:-0}" != 1 ]; then
  echo "== Installing DLIO and its CPU dependencies (idempotent)"
  PYTHON="$PY" bash "$ROOT/scripts/install_dlio_deps.sh" "$VENV"
fi
# DLIO, pydftracer and our wheel are installed in that venv, not in the base interpreter: every
# step below (DLIO, the preload path, dfanalyzer) runs with its python.
if [ ! -x "$VENV/bin/python" ]; then
  echo "run_dlio_example.sh: $VENV/bin/python not found: run scripts/install_dlio_deps.sh (without DLIO_SKIP_INSTALL=1)" >&2
  exit 1
fi
PY="$VENV/bin/python"

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -rf "$OUT/data" "$OUT/output" "$OUT/overhead" "$OUT/generate" "$OUT"/*.png "$OUT"/*.log \
       "$OUT/summary.txt" "$OUT/summary.json" "$OUT/overhead.txt"
EXPECT=()
if [ -n "${DFTRACER_DEV_TREE:-}" ]; then
  export PYTHONPATH="$DFTRACER_DEV_TREE${PYTHONPATH:+:$PYTHONPATH}"
  EXPECT=("$DFTRACER_DEV_TREE")
fi
# Work from OUT: the source tree (without compiled modules) must not shadow the installed package.
cd "$OUT"

echo "== Checking that our dftracer wins over any PyPI pydftracer/dftracer"
"$PY" "$ROOT/scripts/dlio/check_dftracer.py" "${EXPECT[@]}"
PRELOAD=$("$PY" -m dftracer --preload-path)
[ -f "$PRELOAD" ] || { echo "preload library not found: $PRELOAD" >&2; exit 1; }
DLIO_VERSION=$("$PY" -c 'from importlib.metadata import version; print(version("dlio-benchmark"))')
echo "dlio-benchmark $DLIO_VERSION"

# Common DLIO (Hydra) arguments. No mpirun: DLIO initialises MPI as a singleton (1 rank).
dlio_args() {  # $1 = output folder
  echo --config-dir "$ROOT/scripts/dlio" workload=dftracer_unet3d_small \
    "hydra.run.dir=$1/hydra" \
    "++workload.dataset.data_folder=$OUT/data" \
    "++workload.dataset.num_files_train=$FILES" \
    "++workload.dataset.record_length=$RECLEN" \
    "++workload.reader.read_threads=$THREADS" \
    "++workload.reader.batch_size=$BATCH" \
    "++workload.reader.multiprocessing_context=$MPCTX" \
    "++workload.train.epochs=$EPOCHS" \
    "++workload.train.computation_time=$COMPUTE" \
    "++workload.checkpoint.checkpoint_folder=$1/checkpoints" \
    "++workload.output.folder=$1"
}

echo "== Generating $FILES NPZ files of ~$((RECLEN / 1048576)) MiB into $OUT/data"
# shellcheck disable=SC2046
"$PY" -m dlio_benchmark.main $(dlio_args "$OUT/generate") \
  ++workload.workflow.generate_data=True ++workload.workflow.train=False > "$OUT/generate.log" 2>&1 \
  || { tail -30 "$OUT/generate.log"; exit 1; }
echo "dataset: $(ls "$OUT/data/train" | wc -l) files, $(du -sb "$OUT/data" | cut -f1) bytes"

TRACE_ENV=(DFTRACER_ENABLE=1 DFTRACER_INC_METADATA=1 DFTRACER_DATA_DIR="$OUT/data" LD_PRELOAD="$PRELOAD")
run_untraced() {  # $1 = output folder
  # shellcheck disable=SC2046
  env -u DFTRACER_ENABLE -u LD_PRELOAD "$PY" -m dlio_benchmark.main $(dlio_args "$1") > "$1.log" 2>&1 \
    || { tail -30 "$1.log"; exit 1; }
}
run_traced() {  # $1 = output folder (traces go there)
  # shellcheck disable=SC2046
  env "${TRACE_ENV[@]}" DFTRACER_LOG_FILE="$1/trace" \
    "$PY" -m dlio_benchmark.main $(dlio_args "$1") > "$1.log" 2>&1 || { tail -30 "$1.log"; exit 1; }
}

# Overhead: untraced and traced runs alternate in ABBA order (REPEAT pairs) so that a drift in
# machine load hits both sides alike.
REPEAT=${DLIO_REPEAT:-3}
mkdir -p "$OUT/overhead"
traced_run() {  # $1 = pair number
  if [ "$1" = 1 ]; then
    echo "   traced (the documented run, traces kept in $OUT/output)"
    run_traced "$OUT/output"; cp "$OUT/output.log" "$OUT/train.log"
  else
    echo "   traced"
    run_traced "$OUT/overhead/traced-$1"
    rm -f "$OUT/overhead/traced-$1"/*.pfw*
  fi
}
for i in $(seq 1 "$REPEAT"); do
  echo "== Overhead pair $i/$REPEAT ($EPOCHS epochs each)"
  if [ $((i % 2)) = 1 ]; then
    echo "   untraced"; run_untraced "$OUT/overhead/untraced-$i"; traced_run "$i"
  else
    traced_run "$i"; echo "   untraced"; run_untraced "$OUT/overhead/untraced-$i"
  fi
done
if [ "$REPEAT" = 0 ]; then
  echo "== Training $EPOCHS epochs traced: DFTRACER_ENABLE=1 DFTRACER_INC_METADATA=1 LD_PRELOAD=$PRELOAD"
  run_traced "$OUT/output"; cp "$OUT/output.log" "$OUT/train.log"
fi
grep -h "^\[METRIC\]" "$OUT/train.log" || true
ls -l "$OUT"/output/*.pfw* 

echo "== dfanalyzer summary"
# DLIO 2.0.0 tags its application-level reads with cat "reader" and its compute (sleep) with
# cat "ai_framework"; newer DLIO uses the ai.* categories ("compute", "data", "dataloader").
SUMARGS=(--compute-cats ai_framework,compute --app-io-cats reader,data --no-progress)
dfa() {  # the installed console script, or the module (source tree via DFTRACER_DEV_TREE)
  if [ -z "${DFTRACER_DEV_TREE:-}" ] && command -v dfanalyzer >/dev/null; then dfanalyzer "$@"
  else "$PY" -c 'import sys; from dfanalyzer.cli import main; sys.exit(main())' "$@"; fi
}
dfa summary "$OUT/output/*.pfw.gz" "${SUMARGS[@]}" --plot "$OUT" | tee "$OUT/summary.txt"
dfa summary "$OUT/output/*.pfw.gz" "${SUMARGS[@]}" --json > "$OUT/summary.json"
ls -l "$OUT"/*.png

if [ "$REPEAT" -gt 0 ]; then
  "$PY" - "$OUT" "$REPEAT" <<'PYEOF' | tee "$OUT/overhead.txt"
import json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
def metric(d):  # DLIO's own numbers (summary.json): mean over epochs, and the last epoch alone
    m = json.load(open(f"{out}/{d}/summary.json"))["metric"]
    return (m["train_throughput_mean_samples_per_second"], m["train_io_mean_MB_per_second"],
            m["train_throughput_samples_per_second"][-1])
base = [metric(f"overhead/untraced-{i}") for i in range(1, n + 1)]
traced = [metric("output")] + [metric(f"overhead/traced-{i}") for i in range(2, n + 1)]
print("DLIO train throughput (samples/s, summary.json): mean over epochs | last epoch; I/O MB/s")
for i, (b, t) in enumerate(zip(base, traced), 1):
    print(f"pair {i}: untraced {b[0]:7.3f} | {b[2]:7.3f}; {b[1]:7.2f} MB/s   "
          f"traced {t[0]:7.3f} | {t[2]:7.3f}; {t[1]:7.2f} MB/s")
med = lambda xs: statistics.median(xs)
r_mean = med(t[0] / b[0] for b, t in zip(base, traced))
r_last = med(t[2] / b[2] for b, t in zip(base, traced))
print(f"median untraced: {med(b[0] for b in base):.3f} samples/s (last epoch {med(b[2] for b in base):.3f})")
print(f"median traced:   {med(t[0] for t in traced):.3f} samples/s (last epoch {med(t[2] for t in traced):.3f})")
print(f"throughput ratio traced/untraced, median of per-pair ratios: {r_mean:.3f} "
      f"(last epoch only: {r_last:.3f})")
PYEOF
fi
echo "== Done in $(( $(date +%s) - T0 )) s; results in $OUT"
