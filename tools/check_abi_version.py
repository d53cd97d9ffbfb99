#!/usr/bin/env python3
"""Checks the exports against the last release's ABI baseline and the
version (ctest abi.versioned):

    python3 tools/check_abi_version.py ROOT
    python3 tools/check_abi_version.py --self-test

abi/ keeps the baseline of the last release: abi/libvkattn-X.Y.Z.abi
(libabigail, compared by tools/abi-check.sh) and abi/exports-X.Y.Z.txt (the
functions that release exported). The functions the header declares now
(VKATTN_API ... vkattn_*(), as tests/abi/check_exports.sh reads them) must
hold every function of that release (before 1.0 a release only appends),
and any function added since must come with a minor version that moved
past the release's (the CMake project version, ROOT/CMakeLists.txt): an
export added while the version still says X.Y fails, naming the functions
and the version to set. The project version may not be older than the
baseline. --self-test runs the check over made-up trees (an added export
with and without the minor moving, a removed one) and fails unless it
judges each right.

Prints what it found; exits 1 on a violation, 2 on bad arguments.
"""
import glob
import os
import re
import shutil
import sys
import tempfile

DECLARED = re.compile(r"VKATTN_API[^;]*?[^a-z0-9_](vkattn_[a-z0-9_]+)\(")


def version_of(text):
    m = re.search(r"project\(\s*vkattn\s+VERSION\s+([0-9]+)\.([0-9]+)\.([0-9]+)", text)
    return tuple(int(x) for x in m.groups()) if m else None


def fmt(v):
    return "%d.%d.%d" % v


def check(root, quiet=False):
    say = (lambda *a: None) if quiet else print
    version = version_of(open(os.path.join(root, "CMakeLists.txt")).read())
    if not version:
        say("check_abi_version: no project(vkattn VERSION x.y.z) in CMakeLists.txt")
        return 1
    lists = {}
    for path in glob.glob(os.path.join(root, "abi", "exports-*.txt")):
        m = re.match(r"exports-([0-9]+)\.([0-9]+)\.([0-9]+)\.txt$", os.path.basename(path))
        if m:
            lists[tuple(int(x) for x in m.groups())] = path
    if not lists:
        say("check_abi_version: no abi/exports-X.Y.Z.txt (the last release's exports)")
        return 1
    base = max(lists)
    bad = 0
    if len(lists) > 1:
        say("check_abi_version: abi/ keeps one release's baseline; found %s" %
            ", ".join(fmt(v) for v in sorted(lists)))
        bad = 1
    if not os.path.exists(os.path.join(root, "abi", "libvkattn-%s.abi" % fmt(base))):
        say("check_abi_version: abi/libvkattn-%s.abi is missing beside exports-%s.txt" %
            (fmt(base), fmt(base)))
        bad = 1
    released = {l.strip() for l in open(lists[base]) if l.strip() and not l.startswith("#")}
    header = open(os.path.join(root, "include", "vkattn", "vkattn.h")).read()
    declared = set(DECLARED.findall(header))
    added, removed = sorted(declared - released), sorted(released - declared)
    say("project version %s, last release's baseline %s: %d exports then, %d now" %
        (fmt(version), fmt(base), len(released), len(declared)))
    if version < base:
        say("check_abi_version: the project version %s is older than the baseline %s" %
            (fmt(version), fmt(base)))
        bad = 1
    if removed:
        say("check_abi_version: exports of %s are gone (a release before 1.0 only appends): %s"
            % (fmt(base), ", ".join(removed)))
        bad = 1
    if added:
        say("added since %s: %s" % (fmt(base), ", ".join(added)))
        if version[:2] == base[:2]:
            say("check_abi_version: exports were added but the minor version did not move: set "
                "project(vkattn VERSION %d.%d.0) in CMakeLists.txt (and the header's "
                "VKATTN_VERSION_*), and list them in CHANGELOG.md" % (base[0], base[1] + 1))
            bad = 1
    if not bad:
        say("check_abi_version: ok")
    return bad


def self_test():
    """The check over made-up trees: each verdict must be the expected one."""
    tmp = tempfile.mkdtemp(prefix="vkattn-abi-selftest-")
    try:
        def tree(version, baseline, functions):
            d = tempfile.mkdtemp(dir=tmp)
            os.makedirs(os.path.join(d, "abi"))
            os.makedirs(os.path.join(d, "include", "vkattn"))
            with open(os.path.join(d, "CMakeLists.txt"), "w") as f:
                f.write("project(vkattn VERSION %s LANGUAGES C)\n" % version)
            with open(os.path.join(d, "abi", "exports-%s.txt" % baseline), "w") as f:
                f.write("vkattn_a\nvkattn_b\n")
            open(os.path.join(d, "abi", "libvkattn-%s.abi" % baseline), "w").close()
            with open(os.path.join(d, "include", "vkattn", "vkattn.h"), "w") as f:
                for fn in functions:
                    f.write("VKATTN_API int %s(void);\n" % fn)
            return d

        cases = [
            ("unchanged", tree("0.5.0", "0.5.0", ["vkattn_a", "vkattn_b"]), 0),
            ("a fix release", tree("0.5.1", "0.5.0", ["vkattn_a", "vkattn_b"]), 0),
            ("added, minor not moved", tree("0.5.0", "0.5.0", ["vkattn_a", "vkattn_b", "vkattn_c"]),
             1),
            ("added, patch moved only", tree("0.5.1", "0.5.0", ["vkattn_a", "vkattn_b", "vkattn_c"]),
             1),
            ("added, minor moved", tree("0.6.0", "0.5.0", ["vkattn_a", "vkattn_b", "vkattn_c"]), 0),
            ("removed", tree("0.6.0", "0.5.0", ["vkattn_a"]), 1),
            ("older than the baseline", tree("0.4.0", "0.5.0", ["vkattn_a", "vkattn_b"]), 1),
        ]
        wrong = 0
        for name, root, want in cases:
            got = check(root, quiet=True)
            print("%-4s %s: %s" % ("ok" if got == want else "BAD", name,
                                   "refused" if got else "accepted"))
            wrong += got != want
        return 1 if wrong else 0
    finally:
        shutil.rmtree(tmp)


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2 or argv[1].startswith("-"):
        print("usage: check_abi_version.py ROOT | --self-test", file=sys.stderr)
        return 2
    if not os.path.isdir(os.path.join(argv[1], "abi")):
        print("check_abi_version: %s has no abi/ folder" % argv[1], file=sys.stderr)
        return 2
    return check(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
