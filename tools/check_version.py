#!/usr/bin/env python3
"""Checks that every place that states vkattn's version states the same one
(ctest version.consistent):

    python3 tools/check_version.py ROOT BUILD [VKATTN_INFO]

The single source is the CMake project version (ROOT/CMakeLists.txt,
project(vkattn VERSION x.y.z)). Held equal to it: the header's
VKATTN_VERSION_MAJOR/MINOR/PATCH and VKATTN_VERSION_STRING; CHANGELOG.md's
section of that release; and, in the build tree BUILD, the pkg-config file,
the Debian packages' version and the dev package's dependency (CPack's
configuration), the Java POM, the Python package's metadata and
__version__, the Go module's ModuleVersion and the C# assembly's version
(each binding only where it was built: a binding that is not built is
named, not checked). With VKATTN_INFO (the vkattn-info program), the
version of the library it loads (`vkattn-info --version`, vkattn_version()
at run time). Also: the public header names no internal issue tag ("issue
M", "(issue X)"): users cannot look those up; it names releases.

Prints one line per place and exits 1 on any disagreement (2 on bad
arguments).
"""
import os
import re
import subprocess
import sys

ISSUE_TAG = re.compile(r"\b[Ii]ssues? [A-Z][A-Z0-9]*\b")


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def first(pattern, text, flags=0):
    m = re.search(pattern, text, flags)
    return m.group(1) if m else None


def main(argv):
    if len(argv) not in (3, 4) or any(a.startswith("-") for a in argv[1:]):
        print("usage: check_version.py ROOT BUILD [VKATTN_INFO]", file=sys.stderr)
        return 2
    root, build = argv[1], argv[2]
    info = argv[3] if len(argv) == 4 else None
    for d in (root, build):
        if not os.path.isdir(d):
            print("check_version: %s is not a folder" % d, file=sys.stderr)
            return 2
    cmake = read(os.path.join(root, "CMakeLists.txt"))
    want = first(r"project\(\s*vkattn\s+VERSION\s+([0-9]+\.[0-9]+\.[0-9]+)", cmake)
    if not want:
        print("check_version: no project(vkattn VERSION x.y.z) in CMakeLists.txt", file=sys.stderr)
        return 1
    bad = []

    def check(place, got):
        ok = got == want
        print("%-4s %-58s %s" % ("ok" if ok else "BAD", place, got))
        if not ok:
            bad.append(place)

    def skip(place, why):
        print("--   %-58s %s" % (place, why))

    print("the CMake project version: %s" % want)
    header_path = os.path.join(root, "include", "vkattn", "vkattn.h")
    header = read(header_path)
    parts = [first(r"#define VKATTN_VERSION_%s (\d+)" % p, header) for p in
             ("MAJOR", "MINOR", "PATCH")]
    check("vkattn.h VKATTN_VERSION_MAJOR/MINOR/PATCH", ".".join(p or "?" for p in parts))
    check("vkattn.h VKATTN_VERSION_STRING",
          first(r'#define VKATTN_VERSION_STRING "([^"]*)"', header))
    tags = sorted(set(ISSUE_TAG.findall(header)))
    print("%-4s %-58s %s" % ("ok" if not tags else "BAD", "vkattn.h names no internal issue tag",
                             ", ".join(tags) or "none"))
    if tags:
        bad.append("vkattn.h issue tags")
    changelog = os.path.join(root, "CHANGELOG.md")
    sections = re.findall(r"^## \[([0-9.]+)\]", read(changelog), re.M) if os.path.exists(
        changelog) else []
    check("CHANGELOG.md section of the release", want if want in sections else
          "no ## [%s] (sections: %s)" % (want, ", ".join(sections) or "none"))

    pc = os.path.join(build, "vkattn.pc")
    check("pkg-config vkattn.pc Version", first(r"^Version:\s*(\S+)", read(pc), re.M)
          if os.path.exists(pc) else "missing")
    cpack = os.path.join(build, "CPackConfig.cmake")
    if os.path.exists(cpack):
        text = read(cpack)
        check("Debian packages (CPACK_PACKAGE_VERSION)",
              first(r'set\(CPACK_PACKAGE_VERSION "([^"]*)"\)', text))
        check("libvkattn-dev depends on libvkattn0 (= version)",
              first(r'CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "[^"]*\(= ([^)]*)\)', text))
    else:
        check("Debian packages (CPackConfig.cmake)", "missing")

    b = os.path.join(build, "bindings")
    if os.path.isdir(os.path.join(b, "java")):
        pom = os.path.join(b, "java", "vkattn-%s.pom" % want)  # (others: older builds)
        check("Java POM version", first(r"<artifactId>vkattn</artifactId>\s*<version>([^<]*)"
                                        r"</version>", read(pom)) if os.path.exists(pom) else
              "no vkattn-%s.pom" % want)
    else:
        skip("Java POM", "not built")
    pyproject = os.path.join(b, "python", "pyproject.toml")
    if os.path.exists(pyproject):
        check("Python metadata (pyproject.toml)",
              first(r'^version\s*=\s*"([^"]*)"', read(pyproject), re.M))
        ver = os.path.join(b, "python", "vkattn", "_version.py")
        check("Python vkattn.__version__", first(r'__version__\s*=\s*"([^"]*)"', read(ver))
              if os.path.exists(ver) else "missing")
    else:
        skip("Python package", "not built")
    gover = os.path.join(b, "go", "vkattn", "version.go")
    if os.path.isdir(os.path.join(b, "go")):
        check("Go ModuleVersion", first(r'const ModuleVersion = "([^"]*)"', read(gover))
              if os.path.exists(gover) else "missing")
    else:
        skip("Go module", "not built")
    asm = os.path.join(b, "csharp", "AssemblyInfo.cs")
    if os.path.isdir(os.path.join(b, "csharp")):
        text = read(asm) if os.path.exists(asm) else ""
        informational = first(r'AssemblyInformationalVersion\("([^"]*)"\)', text)
        numeric = first(r'AssemblyVersion\("([^"]*)\.0"\)', text)
        check("C# assembly version", informational if informational == numeric else
              "%s / %s" % (informational, numeric))
    else:
        skip("C# assembly", "not built")

    if info:
        try:
            out = subprocess.run([info, "--version"], capture_output=True, text=True,
                                 timeout=60).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as e:
            out = "could not run: %s" % e
        check("vkattn_version() of the library loaded (vkattn-info)",
              first(r"^vkattn (\S+)$", out) or out)
    for b2 in bad:
        print("check_version: %s disagrees with the CMake project version %s" % (b2, want))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
