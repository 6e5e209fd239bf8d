"""Prints the test executables cargo built for one package.

Reads `cargo test --no-run --message-format=json` from standard input and
prints, one a line, the executable of every test target (unit tests and
integration tests) of the package whose directory is the first argument.
"""

import json
import os
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: test_executables.py PACKAGE_DIR <cargo-messages.json", file=sys.stderr)
        return 2
    manifest = os.path.realpath(os.path.join(sys.argv[1], "Cargo.toml"))
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if (
            message.get("reason") == "compiler-artifact"
            and message.get("profile", {}).get("test")
            and message.get("executable")
            and os.path.realpath(message.get("manifest_path", "")) == manifest
        ):
            print(message["executable"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
