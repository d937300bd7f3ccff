#!/usr/bin/env bash
# Style check of the whole tree: clang-format (.clang-format) for C/C++, ruff (pyproject.toml
# [tool.ruff]) for Python. Called by scripts/test.sh, so CI fails on a style difference.
#
#   bash scripts/lint.sh          check only; exit 1 listing what differs
#   bash scripts/lint.sh --fix    rewrite the files: clang-format -i, ruff check --fix, ruff format
#
# C/C++ files: the tracked *.c, *.cc, *.cpp, *.h under src/, include/, tests/cpp/ and
# benchmarks/*.cpp (git ls-files, so build trees and untracked files are left alone; outside a git
# checkout, find). X-macro tables (*.def) keep their hand-aligned columns. Tools: CLANG_FORMAT (default clang-format; Debian bookworm ships 14, and other
# major versions may format a few constructs differently) and RUFF (default: ruff on PATH, else
# `python3 -m ruff`; pip install '.[test]').
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
case "${1:-}" in
  "") ;;
  --fix) fix=1 ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "lint.sh: unknown option '$1' (--fix, --help)" >&2; exit 2 ;;
esac

CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
command -v "$CLANG_FORMAT" >/dev/null || { echo "lint.sh: $CLANG_FORMAT not found (apt-get install clang-format)" >&2; exit 2; }
if [[ -n ${RUFF:-} ]]; then
  read -r -a ruff <<<"$RUFF"
elif command -v ruff >/dev/null; then
  ruff=(ruff)
else
  ruff=("${PYTHON:-python3}" -m ruff)
fi
"${ruff[@]}" --version >/dev/null 2>&1 || { echo "lint.sh: ruff not found (pip install ruff)" >&2; exit 2; }

cxx_files=()
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while IFS= read -r -d '' f; do [[ -f $f ]] && cxx_files+=("$f"); done < <(
    git ls-files -z -- 'src/*.c' 'src/*.cc' 'src/*.cpp' 'src/*.h' 'include/*.h' \
      'tests/cpp/*.c' 'tests/cpp/*.cc' 'tests/cpp/*.cpp' 'tests/cpp/*.h' 'benchmarks/*.cpp')
else
  while IFS= read -r -d '' f; do cxx_files+=("$f"); done < <(
    find src include tests/cpp \( -name '*.c' -o -name '*.cc' -o -name '*.cpp' -o -name '*.h' \) -print0
    find benchmarks -maxdepth 1 -name '*.cpp' -print0)
fi

rc=0
if ((fix)); then
  "$CLANG_FORMAT" -i --style=file "${cxx_files[@]}"
  "${ruff[@]}" check --fix --quiet . || rc=1   # safe fixes (unused imports, import order); the rest is listed
  "${ruff[@]}" format --quiet .
  ((rc == 0)) || echo "lint.sh: ruff findings above need a hand fix" >&2
  exit "$rc"
fi

report=$(mktemp)
trap 'rm -f "$report"' EXIT
if ! "$CLANG_FORMAT" --dry-run --Werror --style=file "${cxx_files[@]}" 2>"$report"; then
  grep 'error: code should be clang-formatted' "$report" | cut -d: -f1 | sort | uniq -c |
    awk '{printf "  needs clang-format: %s (%d places)\n", $2, $1}' >&2
  grep -q 'error: code should be clang-formatted' "$report" || cat "$report" >&2  # a tool error
  echo "lint.sh: clang-format: $(grep -c 'error: code should be clang-formatted' "$report") places differ from .clang-format" >&2
  rc=1
fi
"${ruff[@]}" check --quiet --output-format concise . || rc=1
"${ruff[@]}" format --check --quiet --output-format concise . || rc=1
if ((rc)); then
  echo "lint.sh: style check failed; 'bash scripts/lint.sh --fix' rewrites the files" >&2
else
  echo "lint.sh: ${#cxx_files[@]} C/C++ files match .clang-format; Python passes ruff check and ruff format"
fi
exit "$rc"
