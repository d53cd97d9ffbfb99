#!/usr/bin/env python3
"""Checks that no function under src/ is longer than 120 lines (ctest
functions.length):  python3 tools/check_function_length.py [ROOT] [--max N] [--list]
    A function's lines count from the first line of its signature (a
    template<> line included) to its closing brace, both included; free
    functions, member functions defined in a class or outside it, and
    functions in anonymous namespaces alike; lambdas count as part of the
    function that holds them. Comments, strings and preprocessor lines are
    ignored when the braces are matched. --list prints every function of 80
    lines or more with its length.
Prints each function over the limit and exits 1 if there is any (2 on bad
arguments).
"""
import glob
import os
import re
import sys

SCOPE_KEYWORDS = re.compile(r"\b(namespace|extern)\b")
TYPE_KEYWORDS = re.compile(r"^(template\s*<.*>\s*)?(typedef\s+)?(struct|class|union|enum)\b", re.S)
INIT_LIST = re.compile(r"\)\s*(const\s*)?(noexcept\s*)?:(?!:)")
CONTROL = re.compile(r"^(if|for|while|switch|do|else|try|catch)\b")


def strip(text):
    """The text with comments, string and char literals blanked and
    preprocessor lines emptied; newlines kept, so line numbers hold."""
    out, i, n = [], 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # a preprocessor line (with continuations)
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        m = re.match(r'R"([^(\s]*)\(', text[i:i + 20])
        if m:  # a raw string
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        if c == "\n":
            line_start = True
        out.append(c)
        i += 1
    return "".join(out)


def functions(text):
    """(name, first line, last line) of each function definition."""
    s = strip(text)
    found = []
    stack = []  # kinds of the open braces: ns, type, func, other, init
    header_start = 0  # index where the text since the last boundary starts
    line = 1
    starts = []  # (kind, first line of its header)
    for i, c in enumerate(s):
        if c == "\n":
            line += 1
            continue
        in_scope = all(k in ("ns", "type") for k in stack)
        if c == ";" and in_scope:
            header_start = i + 1
        elif c == ":" and in_scope and stack and stack[-1] == "type":
            # an access specifier ends a header (public:, private:)
            head = s[header_start:i].strip()
            if head in ("public", "private", "protected"):
                header_start = i + 1
        elif c == "{":
            if not in_scope:
                stack.append("other")
                continue
            head = s[header_start:i]
            flat = " ".join(head.split())
            # the header's first line: skip its leading blank lines
            lead = len(head) - len(head.lstrip())
            first = line - s[header_start + lead:i].count("\n")
            if SCOPE_KEYWORDS.match(flat) or flat.startswith("extern"):
                kind = "ns"
            elif TYPE_KEYWORDS.match(flat):
                kind = "type"
            elif "(" in flat and "=" not in flat.split("(")[0] and not CONTROL.match(flat):
                if INIT_LIST.search(flat) and re.search(r"[\w>]$", flat):
                    kind = "init"  # a member's brace initializer in a constructor's list
                else:
                    kind = "func"
            else:
                kind = "other"
            stack.append(kind)
            starts.append((kind, first, flat))
            if kind in ("ns", "type"):
                header_start = i + 1
        elif c == "}":
            if not stack:
                continue
            kind = stack.pop()
            if kind == "other" and not all(k in ("ns", "type") for k in stack):
                continue
            if kind == "init":
                starts.pop()
                continue  # the constructor's header goes on
            if kind in ("ns", "type", "func", "other"):
                if starts:
                    k2, first, flat = starts.pop()
                    if kind == "func":
                        name = flat.split("(")[0].split()[-1] if flat.split("(")[0].split() else flat
                        found.append((name, first, line))
                header_start = i + 1
    return found


def main(argv):
    args = [a for a in argv[1:]]
    limit, listing, root = 120, False, None
    while args:
        a = args.pop(0)
        if a == "--max":
            if not args or not args[0].isdigit():
                print("usage: check_function_length.py [ROOT] [--max N] [--list] "
                      "(--max needs a whole number)", file=sys.stderr)
                return 2
            limit = int(args.pop(0))
        elif a == "--list":
            listing = True
        elif a.startswith("-") or root is not None:
            print("usage: check_function_length.py [ROOT] [--max N] [--list]", file=sys.stderr)
            return 2
        else:
            root = a
    root = root or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if not os.path.isdir(os.path.join(root, "src")):
        print("check_function_length: %s has no src/ folder" % root, file=sys.stderr)
        return 2
    bad, count = [], 0
    for f in sorted(glob.glob(os.path.join(root, "src", "**", "*"), recursive=True)):
        if not f.endswith((".cpp", ".h", ".c")):
            continue
        text = open(f, encoding="utf-8", errors="replace").read()
        for name, first, last in functions(text):
            count += 1
            n = last - first + 1
            where = "%s:%d %s: %d lines" % (os.path.relpath(f, root), first, name, n)
            if n > limit:
                bad.append(where)
            elif listing and n >= 80:
                print(where)
    for b in bad:
        print(b + " (over %d: split it where a name explains a part)" % limit)
    print("check_function_length: %d functions, %d over %d lines" % (count, len(bad), limit))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
