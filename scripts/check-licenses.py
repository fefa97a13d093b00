#!/usr/bin/env python3
"""Fails when a dependency of the workspace is not available under a permissive licence.

Reads `cargo metadata` and accepts a package when at least one alternative of its SPDX
expression (split on OR or '/') consists only of licences on the allow list below.
"""
import json
import re
import subprocess
import sys

ALLOWED = {
    "MIT", "Apache-2.0", "Apache-2.0 WITH LLVM-exception", "BSD-2-Clause", "BSD-3-Clause",
    "ISC", "Zlib", "zlib-acknowledgement", "Unicode-3.0", "Unicode-DFS-2016", "Unlicense",
    "BSL-1.0", "CC0-1.0", "0BSD", "MPL-2.0", "CDLA-Permissive-2.0",
}


def acceptable(expression: str) -> bool:
    expression = expression.replace("(", " ").replace(")", " ")
    for alternative in re.split(r"\s+OR\s+|\s*/\s*", expression):
        parts = [p.strip() for p in re.split(r"\s+AND\s+", alternative) if p.strip()]
        if parts and all(p in ALLOWED for p in parts):
            return True
    return False


def main() -> int:
    metadata = json.loads(subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--locked"]))
    workspace = set(metadata["workspace_members"])
    bad = []
    for package in metadata["packages"]:
        if package["id"] in workspace:
            continue
        licence = package.get("license")
        if not licence or not acceptable(licence):
            bad.append(f"{package['name']} {package['version']}: {licence!r}")
    if bad:
        print("dependencies without a permissive licence:", *bad, sep="\n  ")
        return 1
    print(f"licences: all {len(metadata['packages']) - len(workspace)} dependencies are permissively licensed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
