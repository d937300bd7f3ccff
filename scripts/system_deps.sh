#!/usr/bin/env bash
# Installs the Debian packages that dftracer needs, skipping those already present.
# Usage: bash scripts/system_deps.sh [build|test|all]   (default: build)
#   build: compilers and libraries for `pip install .` (zlib, SQLite, simdjson, yaml-cpp)
#   test:  build + GoogleTest, clang-format (scripts/lint.sh), g++-11, g++-12, clang and ccache
#          (toolchain matrix, scripts/toolchain_matrix.sh; clang also fuzzes), strace, Slurm + munge
#          (cluster integration test), OpenMPI (DLIO test, MPI-IO preload test with mpi4py), HDF5 (tests/test_preload_hdf5.py), chromium (headless rendering of the HTML report)
set -euo pipefail
profile=${1:-build}

build_pkgs=(g++ make pkg-config zlib1g-dev libdeflate-dev libsqlite3-dev libsimdjson-dev libyaml-cpp-dev gzip procps)
test_pkgs=(libgtest-dev clang-format g++-11 g++-12 ccache strace slurm-wlm munge libopenmpi-dev openmpi-bin libhdf5-dev iproute2 clang libclang-rt-14-dev chromium)

pkgs=("${build_pkgs[@]}")
case "$profile" in
  build) ;;
  test|all) pkgs+=("${test_pkgs[@]}") ;;
  *) echo "system_deps.sh: unknown profile '$profile' (build|test|all)" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system_deps.sh: all ${#pkgs[@]} Debian packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "system_deps.sh: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
