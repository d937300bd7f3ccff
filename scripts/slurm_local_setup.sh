#!/usr/bin/env bash
# Install (if needed) and start a one-node Slurm on this host, for the integration test and CI.
#
#   sudo scripts/slurm_local_setup.sh [--timeout S] [--no-install]
#
# Idempotent: run it any number of times. It
#   1. installs Debian's slurm-wlm and munge with apt-get when slurmctld/slurmd/munged are missing
#      (unless --no-install);
#   2. writes /etc/slurm/slurm.conf for one node = this host (CPUs, sockets, cores, threads and
#      RealMemory from `slurmd -C`), partition "debug" (default), with plugins that need no cgroups
#      or systemd (proctrack/linuxproc, task/none, jobacct_gather/none, no accounting), so it runs in
#      containers; a foreign slurm.conf is kept as slurm.conf.orig;
#   3. creates the munge key if missing and starts munged;
#   4. starts slurmctld and slurmd as root (restarts them when the config changed);
#   5. waits until `sinfo` shows the node idle (resuming it if it is down or drained).
# Needs root. Environment: DFA_SLURM_PARTITION (default debug). Exit status 0 when the node is idle.
set -euo pipefail

TIMEOUT=120
INSTALL=1
PARTITION=${DFA_SLURM_PARTITION:-debug}
while [[ $# -gt 0 ]]; do
  case $1 in
    --timeout) TIMEOUT=${2:?--timeout needs a value}; shift 2 ;;
    --no-install) INSTALL=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "slurm_local_setup: unknown option '$1'" >&2; exit 1 ;;
  esac
done
say() { echo "slurm_local_setup: $*"; }
die() { echo "slurm_local_setup: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "must run as root (it writes /etc/slurm and starts the daemons)"
export PATH=$PATH:/usr/sbin:/sbin

# 1. packages
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null \
   || ! command -v sbatch >/dev/null; then
  [[ $INSTALL -eq 1 ]] || die "slurm-wlm/munge are not installed (apt-get install -y slurm-wlm munge)"
  say "installing slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y slurm-wlm munge >/dev/null || { apt-get update >/dev/null && apt-get install -y slurm-wlm munge >/dev/null; }
fi

# 2. slurm.conf
HOST=$(hostname -s)
NODE_HW=$(slurmd -C | head -n 1)
[[ $NODE_HW == NodeName=* ]] || die "unexpected 'slurmd -C' output: $NODE_HW"
NODE_HW=${NODE_HW#NodeName=* }  # drop NodeName=..., keep CPUs=... RealMemory=...
MARK="# written by dftracer scripts/slurm_local_setup.sh"
install -d -m 0755 /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
NEW_CONF=$(cat <<EOF
$MARK
ClusterName=dftracer
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SlurmctldTimeout=60
SlurmdTimeout=60
InactiveLimit=0
KillWait=10
MinJobAge=30
NodeName=$HOST NodeAddr=127.0.0.1 $NODE_HW State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
)
CHANGED=0
if [[ ! -f /etc/slurm/slurm.conf ]] || [[ $(cat /etc/slurm/slurm.conf) != "$NEW_CONF" ]]; then
  if [[ -f /etc/slurm/slurm.conf ]] && ! grep -qF "$MARK" /etc/slurm/slurm.conf; then
    cp -p /etc/slurm/slurm.conf /etc/slurm/slurm.conf.orig
    say "kept the previous /etc/slurm/slurm.conf as slurm.conf.orig"
  fi
  printf '%s\n' "$NEW_CONF" >/etc/slurm/slurm.conf
  CHANGED=1
  say "wrote /etc/slurm/slurm.conf (node $HOST: $NODE_HW)"
fi

# 3. munge
alive() { [[ -n ${1:-} && -r /proc/$1/stat ]] && [[ $(sed 's/.*) //' "/proc/$1/stat" | cut -c1) != Z ]]; }
pid_of() { [[ -s $1 ]] && alive "$(cat "$1")" && cat "$1"; }
if [[ ! -s /etc/munge/munge.key ]]; then
  install -d -m 0700 -o munge -g munge /etc/munge
  if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key --force
  else dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none; fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
fi
install -d -m 0755 -o munge -g munge /run/munge
install -d -m 0700 -o munge -g munge /var/lib/munge /var/log/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  say "starting munged"
  runuser -u munge -- /usr/sbin/munged
  for ((i = 0; i < 50; i++)); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.2; done
  munge -n | unmunge >/dev/null || die "munged does not answer (see /var/log/munge/munged.log)"
fi

# 4. slurmctld and slurmd
stop_daemon() {  # pidfile
  local pid
  pid=$(pid_of "$1") || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do alive "$pid" || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}
if [[ $CHANGED -eq 1 ]]; then
  stop_daemon /run/slurmd.pid
  stop_daemon /run/slurmctld.pid
fi
if ! pid_of /run/slurmctld.pid >/dev/null; then
  say "starting slurmctld"
  slurmctld || die "slurmctld failed (see /var/log/slurm/slurmctld.log)"
fi
for ((i = 0; i < 100; i++)); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
scontrol ping | grep -q UP || die "slurmctld is not responding (see /var/log/slurm/slurmctld.log)"
if ! pid_of /run/slurmd.pid >/dev/null; then
  say "starting slurmd"
  slurmd || die "slurmd failed (see /var/log/slurm/slurmd.log)"
fi

# 5. wait for the node to be idle
deadline=$((SECONDS + TIMEOUT))
while :; do
  state=$(sinfo -h -n "$HOST" -o %T 2>/dev/null | head -n 1)
  case $state in
    idle|mixed|allocated) break ;;
    down*|drain*|drained*|fail*)
      scontrol update NodeName="$HOST" State=RESUME 2>/dev/null || true ;;
  esac
  ((SECONDS < deadline)) || die "node $HOST is '$state', not idle, after ${TIMEOUT} s (see /var/log/slurm/)"
  sleep 1
done
say "node $HOST is $state in partition $PARTITION"
