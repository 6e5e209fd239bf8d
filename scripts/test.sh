#!/usr/bin/env bash
# The whole test suite: the Rust workspace, then the Python package (built
# into a virtual environment under target/, with pandas, matplotlib and
# pytest from PyPI) and its tests, which compare it with the command the
# first step built.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --workspace
venv=target/python-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q ".[test]"
"$venv/bin/python" -m pytest -q crates/python/tests
