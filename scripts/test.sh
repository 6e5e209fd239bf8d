#!/usr/bin/env bash
# The whole test suite: the Rust workspace, then the Python package (built
# into a virtual environment under target/, with pandas, matplotlib and
# pytest from PyPI) and its tests, which compare it with the command the
# first step built.
#
# The engine's tests run beside the rest: its crash tests spend most of
# their time waiting for a disk (O_DIRECT writes and syncs of real files),
# while the other crates' tests keep the CPUs busy. On two cores that
# took one to two minutes off the suite (docs/performance.md). Their
# output follows the rest's.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build every test first, and find the engine's test executables.
mkdir -p target
cargo test --release --workspace --no-run --message-format=json-render-diagnostics \
  >target/test-build.json
mapfile -t engine_tests < <(python3 scripts/test_executables.py crates/engine <target/test-build.json)
if [ "${#engine_tests[@]}" -eq 0 ]; then
  echo "scripts/test.sh: found no test executable of tiermux-engine" >&2
  exit 1
fi

engine_log=target/engine-tests.log
(
  # Stopped (the rest failed), the running test executable stops too.
  child=""
  trap 'kill "$child" 2>/dev/null; exit 143' TERM
  cd crates/engine
  for t in "${engine_tests[@]}"; do
    "$t" &
    child=$!
    wait "$child"
  done
) >"$engine_log" 2>&1 &
engine_pid=$!
trap 'kill "$engine_pid" 2>/dev/null || true' EXIT

cargo test --release --workspace --exclude tiermux-engine

venv=target/python-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q ".[test]"
"$venv/bin/python" -m pytest -q crates/python/tests

engine_status=0
wait "$engine_pid" || engine_status=$?
trap - EXIT
echo "tiermux-engine's tests (run beside the others):"
cat "$engine_log"
if [ "$engine_status" -ne 0 ]; then
  echo "scripts/test.sh: tiermux-engine's tests failed" >&2
  exit "$engine_status"
fi
