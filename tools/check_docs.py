#!/usr/bin/env python3
"""Checks the documentation against the tree (ctest docs.links_and_env):
    python3 tools/check_docs.py [ROOT]
1. every relative Markdown link in README.md and docs/**/*.md ([text](path)
   or [text](path#anchor)) names a file or folder that exists;
2. every VKATTN_* environment variable the library reads (a "VKATTN_..."
   string literal under src/) appears in the environment table of
   docs/guide/environment.md (a table row whose first cell names it in
   backticks).
Prints each problem and exits 1 if there is any. A ROOT that is not
vkattn's source tree (no README.md, docs/guide/environment.md or src/), or
more arguments, is refused (exit 2): it must not pass by finding nothing.
"""
import glob
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links(root):
    bad = []
    files = [os.path.join(root, "README.md")] + sorted(
        glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
    for f in files:
        text = open(f, encoding="utf-8", errors="replace").read()
        # Code spans and blocks hold examples, not links.
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL, mailto:, or an anchor in the same page
            path = target.split("#", 1)[0]
            if not path:
                continue
            full = os.path.normpath(os.path.join(os.path.dirname(f), path))
            if not os.path.exists(full):
                bad.append("%s: link to %s: no such file" % (os.path.relpath(f, root), target))
    return bad


def env_table(root):
    read = set()
    for f in glob.glob(os.path.join(root, "src", "**", "*"), recursive=True):
        if f.endswith((".cpp", ".h", ".c")):
            read |= set(re.findall(r'"(VKATTN_[A-Z0-9_]+)"',
                                   open(f, encoding="utf-8", errors="replace").read()))
    listed = set()
    for line in open(os.path.join(root, "docs", "guide", "environment.md"), encoding="utf-8"):
        if line.startswith("| `VKATTN_"):
            first = line.split("|")[1]
            listed |= set(re.findall(r"`(VKATTN_[A-Z0-9_]+)", first))
    return ["docs/guide/environment.md: the table has no row for %s (read in src/)" % v
            for v in sorted(read - listed)], len(read)


def main(argv):
    if len(argv) > 2 or any(a.startswith("-") for a in argv[1:]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    need = [os.path.join(root, "README.md"), os.path.join(root, "docs", "guide", "environment.md"),
            os.path.join(root, "src")]
    missing = [p for p in need if not os.path.exists(p)]
    if missing:
        print("check_docs: %s is not vkattn's source tree (no %s)" % (root, ", ".join(missing)),
              file=sys.stderr)
        return 2
    bad = links(root)
    env_bad, n_env = env_table(root)
    bad += env_bad
    for b in bad:
        print(b)
    print("check_docs: %d problem(s); %d variables read in src/" % (len(bad), n_env))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
