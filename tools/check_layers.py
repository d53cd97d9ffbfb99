#!/usr/bin/env python3
"""Checks that includes under src/ only point down the layers (ctest
layers.includes):  python3 tools/check_layers.py [ROOT]
    api -> ops -> core; reference stands alone (the oracle shares no code
    with what it judges; the self-check and the tuner in ops use it). A
    file of a layer includes only its own layer's headers and the layers
    below: core never "ops/", "api/" or "reference/", ops never "api/",
    reference none of core, ops and api.
Prints each arrow that points up and exits 1 if there is any. A ROOT
without src/core, src/ops and src/api, or more arguments, is refused (exit
2): it must not pass by finding nothing.
"""
import glob
import os
import re
import sys

FORBIDDEN = {
    "core": ("ops/", "api/", "reference/"),
    "ops": ("api/",),
    "reference": ("core/", "ops/", "api/"),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main(argv):
    if len(argv) > 2 or any(a.startswith("-") for a in argv[1:]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    missing = [d for d in ("core", "ops", "api") if not os.path.isdir(os.path.join(root, "src", d))]
    if missing:
        print("check_layers: %s is not vkattn's source tree (no %s)" %
              (root, ", ".join("src/" + d for d in missing)), file=sys.stderr)
        return 2
    bad = []
    for layer, banned in FORBIDDEN.items():
        for f in sorted(glob.glob(os.path.join(root, "src", layer, "**", "*"), recursive=True)):
            if not f.endswith((".cpp", ".h", ".c")):
                continue
            text = open(f, encoding="utf-8", errors="replace").read()
            for inc in INCLUDE.findall(text):
                if inc.startswith(banned):
                    bad.append("%s includes \"%s\": %s may not depend on that layer" %
                               (os.path.relpath(f, root), inc, layer))
    for b in bad:
        print(b)
    print("check_layers: %d arrow(s) pointing up" % len(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
