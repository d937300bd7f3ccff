#!/usr/bin/env bash
# Start a Dask scheduler here and submit Dask worker jobs to Slurm with sbatch.
#
#   scripts/start_dask_slurm.sh [options]
#
# The scheduler (`dask scheduler --scheduler-file F`) runs in the background on this host; each
# worker job runs `dask worker --scheduler-file F --nthreads C --memory-limit M`. The script returns
# once all workers are connected (or fails after --timeout seconds and cleans up). Scheduler pid,
# job ids and log paths go to the state file that scripts/stop_dask_slurm.sh reads.
# Then: `dfanalyzer summary 'traces/*.pfw.gz' --scheduler-file F`, or
#       `setup_dask_cluster(scheduler_file=F)` in Python.
#
# Options (environment variable in brackets, then default):
#   -f, --scheduler-file F  [DFA_SCHEDULER_FILE]  ./dask-scheduler.json  (must be on a shared file system)
#   -n, --workers N         [DFA_SLURM_WORKERS]   1         worker jobs to submit (one worker each)
#   -c, --cores C           [DFA_SLURM_CORES]     1         cores per job = worker threads (--nthreads)
#   -m, --memory-limit M    [DFA_SLURM_MEMORY]    auto      dask worker --memory-limit (e.g. 8GB)
#       --mem M             [DFA_SLURM_MEM]       (none)    sbatch --mem (Slurm syntax, e.g. 8G)
#   -p, --partition P       [DFA_SLURM_PARTITION] (default partition)
#   -A, --account A         [DFA_SLURM_ACCOUNT]   (none)
#   -t, --time T            [DFA_SLURM_TIME]      00:30:00  walltime of each worker job
#   -s, --state-file S      [DFA_SLURM_STATE]     F with .json replaced by .state
#   -l, --log-dir D         [DFA_SLURM_LOG_DIR]   directory of F  (scheduler log and worker job logs)
#       --port P            [DFA_SCHEDULER_PORT]  0 (a free port)
#       --dashboard A       [DFA_DASHBOARD]       127.0.0.1:0   scheduler dashboard address
#       --timeout S         [DFA_SLURM_TIMEOUT]   600       seconds to wait for the workers
#       --sbatch-arg ARG    (repeatable)                    extra sbatch argument, e.g. --sbatch-arg=--qos=debug
#       --python PY         [DFA_PYTHON]          python3   Python with distributed (used to count workers)
#       --dask CMD          [DFA_DASK]            dask      the dask command (on PATH in the jobs too)
#       --tls-ca-file F, --tls-cert F, --tls-key F       TLS for the scheduler, the workers and
#                           this script's client (Dask's security config, docs/cluster.md); without
#                           them the scheduler listens on all addresses in plain TCP (a warning says so)
#   -h, --help
# Files are created safely: the scheduler log, the job script and the job logs go to a new private
# directory D/dask-slurm.XXXXXX (mktemp -d, mode 0700); the state file is written to a mktemp file
# and renamed into place; a planted symbolic link is never written through.
# Exit status: 0 when all workers are connected; 1 on failure (nothing is left running).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "start_dask_slurm: $*" >&2; exit 1; }

SCHED_FILE=${DFA_SCHEDULER_FILE:-$PWD/dask-scheduler.json}
WORKERS=${DFA_SLURM_WORKERS:-1}
CORES=${DFA_SLURM_CORES:-1}
MEMLIMIT=${DFA_SLURM_MEMORY:-auto}
JOBMEM=${DFA_SLURM_MEM:-}
PARTITION=${DFA_SLURM_PARTITION:-}
ACCOUNT=${DFA_SLURM_ACCOUNT:-}
WALLTIME=${DFA_SLURM_TIME:-00:30:00}
STATE=${DFA_SLURM_STATE:-}
LOGDIR=${DFA_SLURM_LOG_DIR:-}
PORT=${DFA_SCHEDULER_PORT:-0}
DASHBOARD=${DFA_DASHBOARD:-127.0.0.1:0}
TIMEOUT=${DFA_SLURM_TIMEOUT:-600}
PY=${DFA_PYTHON:-python3}
DASK=${DFA_DASK:-dask}
SBATCH_EXTRA=()
TLS_CA=${DFA_TLS_CA_FILE:-}
TLS_CERT=${DFA_TLS_CERT:-}
TLS_KEY=${DFA_TLS_KEY:-}

need() { [[ $# -ge 2 && -n $2 ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    -f|--scheduler-file) need "$@"; SCHED_FILE=$2; shift 2 ;;
    -n|--workers) need "$@"; WORKERS=$2; shift 2 ;;
    -c|--cores) need "$@"; CORES=$2; shift 2 ;;
    -m|--memory-limit) need "$@"; MEMLIMIT=$2; shift 2 ;;
    --mem) need "$@"; JOBMEM=$2; shift 2 ;;
    -p|--partition) need "$@"; PARTITION=$2; shift 2 ;;
    -A|--account) need "$@"; ACCOUNT=$2; shift 2 ;;
    -t|--time) need "$@"; WALLTIME=$2; shift 2 ;;
    -s|--state-file) need "$@"; STATE=$2; shift 2 ;;
    -l|--log-dir) need "$@"; LOGDIR=$2; shift 2 ;;
    --port) need "$@"; PORT=$2; shift 2 ;;
    --dashboard) need "$@"; DASHBOARD=$2; shift 2 ;;
    --timeout) need "$@"; TIMEOUT=$2; shift 2 ;;
    --sbatch-arg) need "$@"; SBATCH_EXTRA+=("$2"); shift 2 ;;
    --sbatch-arg=*) SBATCH_EXTRA+=("${1#--sbatch-arg=}"); shift ;;
    --python) need "$@"; PY=$2; shift 2 ;;
    --dask) need "$@"; DASK=$2; shift 2 ;;
    --tls-ca-file) need "$@"; TLS_CA=$2; shift 2 ;;
    --tls-cert) need "$@"; TLS_CERT=$2; shift 2 ;;
    --tls-key) need "$@"; TLS_KEY=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

[[ $WORKERS =~ ^[1-9][0-9]*$ ]] || die "--workers must be a positive integer, got '$WORKERS'"
[[ $CORES =~ ^[1-9][0-9]*$ ]] || die "--cores must be a positive integer, got '$CORES'"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive integer (seconds), got '$TIMEOUT'"
[[ $PORT =~ ^[0-9]+$ ]] || die "--port must be an integer, got '$PORT'"
command -v sbatch >/dev/null || die "sbatch not found: is Slurm installed and on PATH?"
command -v "$DASK" >/dev/null || die "'$DASK' not found (pip install 'dask[distributed]')"
TLS_ARGS=()
if [[ -n $TLS_CA$TLS_CERT$TLS_KEY ]]; then
  [[ -n $TLS_CA && -n $TLS_CERT && -n $TLS_KEY ]] || die "--tls-ca-file, --tls-cert and --tls-key go together"
  for f in "$TLS_CA" "$TLS_CERT" "$TLS_KEY"; do [[ -r $f ]] || die "cannot read TLS file '$f'"; done
  TLS_CA=$(realpath -- "$TLS_CA"); TLS_CERT=$(realpath -- "$TLS_CERT"); TLS_KEY=$(realpath -- "$TLS_KEY")
  TLS_ARGS=(--tls-ca-file "$TLS_CA" --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY")
  # the same files for this script's client and for the jobs (sbatch --export=ALL): Dask's config
  export DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True
  export DASK_DISTRIBUTED__COMM__TLS__CA_FILE=$TLS_CA
  export DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=$TLS_CERT DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=$TLS_KEY
  export DASK_DISTRIBUTED__COMM__TLS__WORKER__CERT=$TLS_CERT DASK_DISTRIBUTED__COMM__TLS__WORKER__KEY=$TLS_KEY
  export DASK_DISTRIBUTED__COMM__TLS__SCHEDULER__CERT=$TLS_CERT DASK_DISTRIBUTED__COMM__TLS__SCHEDULER__KEY=$TLS_KEY
fi

mkdir -p "$(dirname -- "$SCHED_FILE")"
SCHED_FILE=$(cd "$(dirname -- "$SCHED_FILE")" && pwd)/$(basename -- "$SCHED_FILE")
[[ -n $STATE ]] || STATE=${SCHED_FILE%.json}.state
[[ $STATE != "$SCHED_FILE" ]] || STATE=$SCHED_FILE.state
[[ -n $LOGDIR ]] || LOGDIR=$(dirname -- "$SCHED_FILE")
mkdir -p "$LOGDIR"
LOGDIR=$(cd "$LOGDIR" && pwd)
# A fresh private directory for this run's files (mktemp -d: O_EXCL, mode 0700): fixed names
# inside it cannot be planted by another user.
RUN_DIR=$(mktemp -d "$LOGDIR/dask-slurm.XXXXXX") || die "cannot create a directory in $LOGDIR"
SCHED_LOG=$RUN_DIR/dask-scheduler.log
JOB_SCRIPT=$RUN_DIR/dask-worker.sbatch

if [[ -e $STATE ]]; then
  old_pid=$(sed -n 's/^SCHEDULER_PID=//p' "$STATE")
  if [[ -n $old_pid ]] && kill -0 "$old_pid" 2>/dev/null; then
    die "a scheduler from $STATE is still running (pid $old_pid); run scripts/stop_dask_slurm.sh -s $STATE first"
  fi
  rm -f -- "$STATE"
fi
rm -f -- "$SCHED_FILE"

SCHED_PID=""
JOBS=()
write_state() {
  local tmp
  tmp=$(mktemp "$STATE.XXXXXX")
  {
    echo "SCHEDULER_FILE=$SCHED_FILE"
    echo "SCHEDULER_PID=$SCHED_PID"
    echo "SCHEDULER_LOG=$SCHED_LOG"
    echo "LOG_DIR=$RUN_DIR"
    echo "JOB_SCRIPT=$JOB_SCRIPT"
    echo "JOB_IDS=${JOBS[*]}"
  } >"$tmp"
  mv -f -- "$tmp" "$STATE"  # rename: replaces a planted link instead of writing through it
}
cleanup_on_error() {
  local rc=$?
  if [[ $rc -ne 0 ]]; then
    [[ ${#JOBS[@]} -eq 0 ]] || scancel "${JOBS[@]}" 2>/dev/null || true
    [[ -z $SCHED_PID ]] || kill "$SCHED_PID" 2>/dev/null || true
    rm -f -- "$STATE" "$SCHED_FILE"
  fi
}
trap cleanup_on_error EXIT

# 1. the scheduler, in the background (setsid: it survives this shell and its terminal)
setsid "$DASK" scheduler --scheduler-file "$SCHED_FILE" --port "$PORT" \
  --dashboard-address "$DASHBOARD" ${TLS_ARGS[@]+"${TLS_ARGS[@]}"} >"$SCHED_LOG" 2>&1 </dev/null &
SCHED_PID=$!
write_state
for ((i = 0; i < 600; i++)); do
  [[ -s $SCHED_FILE ]] && break
  kill -0 "$SCHED_PID" 2>/dev/null || { tail -n 20 "$SCHED_LOG" >&2; die "the scheduler exited"; }
  sleep 0.1
done
[[ -s $SCHED_FILE ]] || die "the scheduler wrote no $SCHED_FILE within 60 s (log: $SCHED_LOG)"
echo "start_dask_slurm: scheduler pid $SCHED_PID, scheduler file $SCHED_FILE"
if [[ ${#TLS_ARGS[@]} -eq 0 ]]; then
  echo "start_dask_slurm: warning: the scheduler listens on all addresses in plain TCP without TLS;" \
       "anyone who can reach $(sed -n 's/.*"address": *"\([^"]*\)".*/\1/p' "$SCHED_FILE") can run code as you" \
       "(use --tls-ca-file/--tls-cert/--tls-key, docs/cluster.md)" >&2
fi

# 2. the worker jobs
{
  echo "#!/usr/bin/env bash"
  echo "# Dask worker job written by dftracer scripts/start_dask_slurm.sh"
  printf 'exec %q worker --scheduler-file %q --nthreads %q --nworkers 1 --memory-limit %q' \
    "$DASK" "$SCHED_FILE" "$CORES" "$MEMLIMIT"
  for a in ${TLS_ARGS[@]+"${TLS_ARGS[@]}"}; do printf ' %q' "$a"; done
  echo ' --name "slurm-${SLURM_JOB_ID}" --death-timeout 120 --local-directory "${TMPDIR:-/tmp}"'
} >"$JOB_SCRIPT"
SBATCH_ARGS=(--parsable --job-name dask-worker --nodes 1 --ntasks 1 --cpus-per-task "$CORES"
             --time "$WALLTIME" --output "$RUN_DIR/dask-worker-%j.out")
[[ -z $PARTITION ]] || SBATCH_ARGS+=(--partition "$PARTITION")
[[ -z $ACCOUNT ]] || SBATCH_ARGS+=(--account "$ACCOUNT")
[[ -z $JOBMEM ]] || SBATCH_ARGS+=(--mem "$JOBMEM")
SBATCH_ARGS+=(${SBATCH_EXTRA[@]+"${SBATCH_EXTRA[@]}"})
for ((i = 0; i < WORKERS; i++)); do
  out=$(sbatch "${SBATCH_ARGS[@]}" "$JOB_SCRIPT") || die "sbatch failed: $out"
  JOBS+=("${out%%;*}")
  write_state
done
echo "start_dask_slurm: submitted worker jobs ${JOBS[*]}"

# 3. wait until every worker is connected
count_workers() {
  "$PY" - "$SCHED_FILE" <<'EOF' 2>/dev/null
import sys
from distributed import Client
with Client(scheduler_file=sys.argv[1], timeout=20) as c:
    print(len(c.scheduler_info(n_workers=-1)["workers"]))
EOF
}
deadline=$((SECONDS + TIMEOUT))
have=0
while :; do
  have=$(count_workers || echo 0)
  [[ $have =~ ^[0-9]+$ ]] || have=0
  ((have >= WORKERS)) && break
  kill -0 "$SCHED_PID" 2>/dev/null || die "the scheduler exited (log: $SCHED_LOG)"
  alive=$(squeue -h -j "$(IFS=,; echo "${JOBS[*]}")" -o %i 2>/dev/null | wc -l)
  if ((alive + have < WORKERS)); then
    for j in "${JOBS[@]}"; do [[ -s $RUN_DIR/dask-worker-$j.out ]] && tail -n 5 "$RUN_DIR/dask-worker-$j.out" >&2; done
    die "$((WORKERS - have - alive)) worker job(s) ended before connecting (logs: $RUN_DIR/dask-worker-<jobid>.out)"
  fi
  ((SECONDS < deadline)) || die "only $have of $WORKERS workers connected within ${TIMEOUT} s (squeue: $(squeue -h -j "$(IFS=,; echo "${JOBS[*]}")" -o '%i:%T:%R' | tr '\n' ' '))"
  sleep 2
done
echo "start_dask_slurm: $have workers connected; state in $STATE"
echo "start_dask_slurm: stop with: $(dirname -- "$0")/stop_dask_slurm.sh -s $STATE"
