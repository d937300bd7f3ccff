#!/usr/bin/env bash
# Stop what scripts/start_dask_slurm.sh started: a thin wrapper over
#   python -m dfanalyzer.slurm stop [-f SCHEDULER_FILE | -s STATE_FILE] [--timeout S]   (docs/cluster.md)
exec "${DFA_PYTHON:-python3}" -m dfanalyzer.slurm stop "$@"
