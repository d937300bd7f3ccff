#!/usr/bin/env bash
# Start Dask workers on Slurm, shared through a scheduler file: a thin wrapper over
#   python -m dfanalyzer.slurm start [options]     (dask-jobqueue's SLURMCluster; docs/cluster.md)
# e.g. scripts/start_dask_slurm.sh -f $HOME/dask/scheduler.json -n 4 -c 16 -m 60GB -p pbatch -t 02:00:00
# then `dfanalyzer summary 'traces/*.pfw.gz' --scheduler-file F`; stop with scripts/stop_dask_slurm.sh.
# DFA_PYTHON (default python3) is the Python with dftracer installed. Options: --help.
exec "${DFA_PYTHON:-python3}" -m dfanalyzer.slurm start "$@"
