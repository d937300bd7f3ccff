#!/usr/bin/env bash
# Install the DLIO benchmark as its users do -- with its own declared dependencies, PyPI pydftracer
# included -- into a venv beside our dftracer (idempotent). Prints the venv's python at the end.
#
#   scripts/install_dlio_deps.sh [VENV]     VENV defaults to build/dlio-venv
#   PYTHON=python3.11        base interpreter (default python3); the venv sees its site-packages
#   DFTRACER_WHEEL=path.whl  our wheel to install (default: built from this tree into build/wheels)
#   DLIO_VERSION=2.0.0  PYDFTRACER_VERSION=2.0.6
#
# What is installed, from dlio-benchmark's own Requires-Dist (read from its wheel's metadata):
#   - every requirement as declared (Pillow, PyYAML, h5py, mpi4py, numpy, omegaconf, pandas, psutil,
#     hydra-core, ...), resolved by pip into the venv (the base interpreter's packages count);
#   - pydftracer: DLIO 2.0.0 pins pydftracer==1.0.2, which is upstream's native tracer in a wheel
#     (its own libdftracer, and files that overwrite ours: dftracer/__init__.py, dftracer/logger.py,
#     dftracer/lib/libdftracer_preload.so, dfanalyzer/__init__.py, dfanalyzer/plots.py; its
#     uninstall deletes them). We install pydftracer ${PYDFTRACER_VERSION} instead: the pure-Python
#     layer that newer DLIO requires (pydftracer>=2.0.2), which drives our core through our native
#     dftracer.dftracer. DLIO's GitHub head lists upstream's native `dftracer` only in its [test] and
#     [dftracer] extras; no extra is installed here, and the final check fails if the `dftracer`
#     distribution is not ours;
#   - tensorflow: satisfied by tensorflow-cpu (the same `tensorflow` module, CPU wheel);
#   - torch: torch==2.13.0, the CPU wheel on this machine's disk (a plain `torch` would pull a
#     several-GB CUDA build);
#   - not installed, with the reason: nvidia-dali-cuda110 (GPU only; PyPI's entry is a stub whose
#     build downloads the wheel from NVIDIA's own index, unreachable offline; DLIO imports DALI
#     only for its dali loaders), torchvision and torchaudio (PyPI's builds fail to import beside
#     the CPU torch 2.13.0; DLIO 2.0.0 does not import them).
# Debian OpenMPI (libopenmpi-dev, openmpi-bin) comes from apt-get where missing (mpi4py needs it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
VENV=${1:-$ROOT/build/dlio-venv}
DLIO_VERSION=${DLIO_VERSION:-2.0.0}
PYDFTRACER_VERSION=${PYDFTRACER_VERSION:-2.0.6}
PIPQ=(--disable-pip-version-check -q)

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

# The venv: sees the base interpreter's packages (torch, tensorflow-cpu are large).
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv --system-site-packages "$VENV"
fi
VPY="$VENV/bin/python"
VPIP=("$VPY" -m pip install "${PIPQ[@]}" --no-warn-script-location)

# Our package, as a wheel (the venv's site-packages must hold it: pydftracer installs into it).
WHEEL=${DFTRACER_WHEEL:-}
if [ -z "$WHEEL" ]; then
  mkdir -p "$ROOT/build/wheels"
  "$PY" -m pip wheel "${PIPQ[@]}" --no-deps --no-build-isolation "$ROOT" -w "$ROOT/build/wheels" \
    || "$PY" -m pip wheel "${PIPQ[@]}" --no-deps "$ROOT" -w "$ROOT/build/wheels"
  WHEEL=$(ls -t "$ROOT"/build/wheels/dftracer-*.whl | head -n1)
fi
"${VPIP[@]}" --no-deps --force-reinstall "$WHEEL"

# torch and tensorflow as described above, into the base interpreter (where missing): the venv
# sees them, and so do the tests that run the DLIO-shaped workload with our API and no pydftracer.
"$PY" -c "import torch" 2>/dev/null || "$PY" -m pip install "${PIPQ[@]}" "torch==2.13.0"
"$PY" -c "import tensorflow" 2>/dev/null || "$PY" -m pip install "${PIPQ[@]}" tensorflow-cpu

# DLIO itself, then its declared requirements with the substitutions above.
"${VPIP[@]}" --no-deps "dlio-benchmark==$DLIO_VERSION"
mapfile -t reqs < <("$VPY" -I - "$PYDFTRACER_VERSION" <<'PYEOF'
import re, sys
from importlib.metadata import requires
from packaging.requirements import Requirement
skip = {"nvidia-dali-cuda110", "nvidia-dali-cuda120", "torchvision", "torchaudio", "torch", "tensorflow"}
for raw in requires("dlio-benchmark") or []:
    r = Requirement(raw)
    if r.marker is not None and not r.marker.evaluate({"extra": ""}):
        continue  # extras ([test], [dftracer]) and other platforms
    name = re.sub(r"[-_.]+", "-", r.name).lower()
    if name in skip:
        print(f"# skip {raw}", file=sys.stderr)
    elif name == "pydftracer":
        print(f"# {raw} -> pydftracer=={sys.argv[1]}", file=sys.stderr)
        print(f"pydftracer=={sys.argv[1]}")
    elif name == "dftracer":
        print(f"# skip {raw} (upstream's native tracer; ours is installed)", file=sys.stderr)
    else:
        print(str(r))
PYEOF
)
"${VPIP[@]}" "${reqs[@]}" "typing_extensions>=4.0"

# The `dftracer` distribution must be ours, with pydftracer's layer driving our core.
"$VPY" -I - <<'PYEOF'
import importlib.util, sys
from importlib.metadata import version
import dftracer
if importlib.util.find_spec("dftracer._dftracer") is None or importlib.util.find_spec("dftracer.dftracer") is None:
    sys.exit("install_dlio_deps: the installed dftracer is not ours (no dftracer._dftracer)")
print("install_dlio_deps: dlio-benchmark", version("dlio-benchmark"), "pydftracer", version("pydftracer"),
      "dftracer", version("dftracer"), "torch", version("torch"), "tensorflow-cpu", version("tensorflow-cpu"))
PYEOF
"$VPY" -I "$ROOT/scripts/dlio/check_dftracer.py" "$VENV" >/dev/null
echo "$VPY"
