#!/usr/bin/env python3
"""Side by side of two benchmark JSON files in vkattn-bench's shape (e.g.
vkattn-bench --json on one device, tools/bench_torch.py --json on the same
device; or two vkattn runs before and after a change):

    python3 tools/compare_bench.py A.json B.json

Prints, per case present in both, the median times, B / A (above 1: A is
faster), each side's GFLOP/s, and each side's fraction of its own peak where
it has one. Cases present in one file only are listed after the table.
A file that is missing or not such JSON is an error (exit 1) naming it.
"""
import json
import sys


def load(path):
    """(label, {name: case}); ValueError/OSError for a file that is not one."""
    with open(path) as f:
        d = json.load(f)
    if not isinstance(d, dict) or not isinstance(d.get("cases", []), list) or \
            not all(isinstance(c, dict) and "name" in c for c in d.get("cases", [])):
        raise ValueError("not a benchmark JSON file (an object whose \"cases\" each have a \"name\")")
    cases = {c["name"]: c for c in d.get("cases", [])}
    dev = d.get("device", {})
    label = dev.get("name") or path
    backend = d.get("backend")
    if backend:
        label = "%s (%s)" % (label, backend)
    return label, cases


def fmt(x, spec):
    return spec % x if isinstance(x, (int, float)) else "-"


def main(argv):
    if len(argv) != 3 or any(x.startswith("-") for x in argv[1:]):
        print(__doc__.strip(), file=sys.stderr)
        return 1
    loaded = []
    for path in argv[1:]:
        try:
            loaded.append(load(path))
        except (OSError, ValueError) as e:
            print("compare_bench: %s: %s" % (path, e.strerror if isinstance(e, OSError) else e),
                  file=sys.stderr)
            return 1
    (la, a), (lb, b) = loaded
    print("A: %s  [%s]" % (argv[1], la))
    print("B: %s  [%s]" % (argv[2], lb))
    rows = [("case", "A ms", "B ms", "B / A", "A GFLOP/s", "B GFLOP/s", "A % peak", "B % peak")]
    for name in [n for n in a if n in b]:
        ca, cb = a[name], b[name]
        ma, mb = ca.get("median_ms"), cb.get("median_ms")
        ratio = mb / ma if isinstance(ma, (int, float)) and isinstance(mb, (int, float)) and ma > 0 else None
        fa, fb = ca.get("fraction_of_peak"), cb.get("fraction_of_peak")
        rows.append((
            name,
            fmt(ma, "%.3f"),
            fmt(mb, "%.3f"),
            fmt(ratio, "%.2f"),
            fmt(ca.get("gflops"), "%.1f"),
            fmt(cb.get("gflops"), "%.1f"),
            fmt(fa * 100 if isinstance(fa, (int, float)) else None, "%.1f %%"),
            fmt(fb * 100 if isinstance(fb, (int, float)) else None, "%.1f %%"),
        ))
        for side, c in (("A", ca), ("B", cb)):
            if c.get("ok") is False:
                print("warning: %s %s did not verify (max_err %s)" % (side, name, c.get("max_err")),
                      file=sys.stderr)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("  ".join(s.ljust(w) if j == 0 else s.rjust(w) for j, (s, w) in enumerate(zip(r, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    only_a = [n for n in a if n not in b]
    only_b = [n for n in b if n not in a]
    if only_a:
        print("only in A: " + ", ".join(only_a))
    if only_b:
        print("only in B: " + ", ".join(only_b))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
