#!/usr/bin/env bash
# Stop what scripts/start_dask_slurm.sh started: scancel its worker jobs, stop its scheduler.
#
#   scripts/stop_dask_slurm.sh [-f SCHEDULER_FILE | -s STATE_FILE] [--timeout S]
#
#   -f, --scheduler-file F  [DFA_SCHEDULER_FILE]  ./dask-scheduler.json; the state file is F with
#                                                 .json replaced by .state
#   -s, --state-file S      [DFA_SLURM_STATE]     the state file written by start_dask_slurm.sh
#       --timeout S         [DFA_SLURM_TIMEOUT]   60   seconds to wait for jobs and scheduler to end
#   -h, --help
# Only the job ids and the scheduler pid recorded in the state file are touched. Removes the state
# file and the scheduler file. Exit status 0 when everything is stopped.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "stop_dask_slurm: $*" >&2; exit 1; }

SCHED_FILE=${DFA_SCHEDULER_FILE:-$PWD/dask-scheduler.json}
STATE=${DFA_SLURM_STATE:-}
TIMEOUT=${DFA_SLURM_TIMEOUT:-60}
need() { [[ $# -ge 2 && -n $2 ]] || die "option $1 needs a value"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    -f|--scheduler-file) need "$@"; SCHED_FILE=$2; shift 2 ;;
    -s|--state-file) need "$@"; STATE=$2; shift 2 ;;
    --timeout) need "$@"; TIMEOUT=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "--timeout must be a positive integer (seconds), got '$TIMEOUT'"
if [[ -z $STATE ]]; then
  STATE=${SCHED_FILE%.json}.state
  [[ $STATE != "$SCHED_FILE" ]] || STATE=$SCHED_FILE.state
fi
[[ -f $STATE ]] || die "no state file $STATE (was start_dask_slurm.sh run with this scheduler file?)"

get() { sed -n "s/^$1=//p" "$STATE" | tail -n 1; }
SCHED_FILE=$(get SCHEDULER_FILE)
SCHED_PID=$(get SCHEDULER_PID)
read -r -a JOBS <<<"$(get JOB_IDS)"

# alive PID: the process exists and is not a zombie (an orphan may wait long for its reaper).
alive() { [[ -r /proc/$1/stat ]] && [[ $(sed 's/.*) //' "/proc/$1/stat" | cut -c1) != Z ]]; }

rc=0
if [[ ${#JOBS[@]} -gt 0 ]]; then
  scancel "${JOBS[@]}" 2>/dev/null || true
  ids=$(IFS=,; echo "${JOBS[*]}")
  deadline=$((SECONDS + TIMEOUT))
  while [[ -n $(squeue -h -j "$ids" -o %i 2>/dev/null) ]]; do
    if ((SECONDS >= deadline)); then
      echo "stop_dask_slurm: jobs still in squeue after ${TIMEOUT} s: $(squeue -h -j "$ids" -o '%i:%T' | tr '\n' ' ')" >&2
      rc=1
      break
    fi
    sleep 1
  done
  echo "stop_dask_slurm: cancelled worker jobs ${JOBS[*]}"
fi

# Stop the scheduler only if the pid still belongs to a dask scheduler (pids get reused).
if [[ -n $SCHED_PID ]] && alive "$SCHED_PID" \
   && tr '\0' ' ' <"/proc/$SCHED_PID/cmdline" 2>/dev/null | grep -q scheduler; then
  kill -TERM "$SCHED_PID" 2>/dev/null || true
  for ((i = 0; i < TIMEOUT * 10; i++)); do
    alive "$SCHED_PID" || break
    sleep 0.1
  done
  if alive "$SCHED_PID"; then
    kill -KILL "$SCHED_PID" 2>/dev/null || true
  fi
  echo "stop_dask_slurm: stopped scheduler pid $SCHED_PID"
fi
rm -f -- "$STATE" "$SCHED_FILE"
exit "$rc"
