#!/usr/bin/env bash
# Install what the DLIO benchmark needs for a CPU PyTorch NPZ run (idempotent).
#   - Debian OpenMPI (libopenmpi-dev, openmpi-bin) via apt-get, only where missing;
#   - dlio-benchmark from PyPI with --no-deps (so it cannot pull pydftracer/dftracer),
#     plus the imports it needs (torch from the local CPU wheel; tensorflow-cpu, which DLIO 2.0.0
#     imports even for PyTorch runs).
# Usage: scripts/install_dlio_deps.sh   (PYTHON=python3.11 to pick an interpreter)
set -euo pipefail
PY=${PYTHON:-python3}
PIP=("$PY" -m pip install --disable-pip-version-check -q --no-warn-script-location)

need_apt=()
for p in libopenmpi-dev openmpi-bin; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${need_apt[@]}"
fi

have() { "$PY" - "$@" <<'PYEOF'
import importlib.util, sys
sys.exit(0 if all(importlib.util.find_spec(m) for m in sys.argv[1:]) else 1)
PYEOF
}

# Imports DLIO 2.0.0 needs for a PyTorch NPZ run (found by running it). tensorflow: DLIO 2.0.0's
# profiler_factory imports dlio_benchmark.profiler.tf_profiler, which does `import tensorflow` at
# module level, so even a PyTorch run fails without it (the CPU wheel is enough).
mods=(hydra omegaconf mpi4py h5py PIL psutil numpy pandas torch yaml tensorflow)
pkgs=(hydra-core omegaconf mpi4py h5py Pillow psutil numpy pandas "torch==2.13.0" PyYAML tensorflow-cpu)
missing=()
for i in "${!mods[@]}"; do
  have "${mods[$i]}" || missing+=("${pkgs[$i]}")
done
if [ ${#missing[@]} -gt 0 ]; then
  "${PIP[@]}" "${missing[@]}"
fi
if ! have dlio_benchmark; then
  # --no-deps: DLIO's own requirements pin pydftracer, which must not shadow our dftracer.
  "${PIP[@]}" --no-deps "dlio-benchmark==${DLIO_VERSION:-2.0.0}"
fi
"$PY" -c "from importlib.metadata import version as v; print('install_dlio_deps: dlio-benchmark', v('dlio-benchmark'), 'torch', v('torch'), 'tensorflow-cpu', v('tensorflow-cpu'))"
