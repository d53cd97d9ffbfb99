#!/usr/bin/env python3
"""The GPU campaign's summary (tools/gpu/run_checks.sh, stage `summary`):
    python3 tools/gpu/summary.py OUTDIR > OUTDIR/summary.md
Reads what the stages left in OUTDIR (any of them may be missing: a stage
cut short) and prints, in Markdown, the tables a closing note needs: the
device and driver; each test executable's exit status and failures, and the
validation messages; the coopmat self-checks per creation variant; the
bench with each case's fraction of the device's measured peaks (FMA, read,
f16 matrices); tuned against the device table per case; coopmat and tiled
prefill against PyTorch; and the tuning file's entries.
"""
import glob
import json
import os
import re
import sys


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def load_json(path):
    text = read(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def cases(d):
    return {c["name"]: c for c in (d or {}).get("cases", [])}


def ratio_table(a_json, b_json, a_head, b_head, ratio_head, order=None):
    """The cases both files timed: A's and B's median ms and A / B, in
    the order of `order` (default A)."""
    a, b = cases(a_json), cases(b_json)
    print("| case | %s | %s | %s |" % (a_head, b_head, ratio_head))
    print("|---|---|---|---|")
    for name in cases(order or a_json):
        ta, tb = a.get(name, {}).get("median_ms"), b.get(name, {}).get("median_ms")
        if ta and tb:
            print("| %s | %.3f | %.3f | %.2f |" % (name, ta, tb, ta / tb))


def fmt(x, spec="%.3f"):
    return spec % x if isinstance(x, (int, float)) else "-"


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 1
    out = argv[1]
    if not os.path.isdir(out):
        print("summary.py: no folder %s (run_checks.sh's OUTDIR)" % out, file=sys.stderr)
        return 1
    print("# GPU campaign summary\n")
    info = read(os.path.join(out, "info.log"))
    print("## Device\n")
    if info:
        for line in info.splitlines():
            if re.match(r"^(device \d+:|default device:|device row:)", line) or ", " in line[:80] and \
                    "MiB" in line:
                print("    " + line)
    else:
        print("(no info stage)")
    print("\n## Tests (validation layer on)\n")
    tests = read(os.path.join(out, "tests.log"))
    if tests:
        print("| executable | exit | seconds |")
        print("|---|---|---|")
        for m in re.finditer(r"^== (\S+) exit (\d+) in (\d+) s", tests, re.M):
            print("| %s | %s | %s |" % m.groups())
        failed = [l for l in tests.splitlines() if l.startswith("[  FAILED")]
        print("\nfailed: %d line(s)%s" % (len(failed), "" if not failed else ":"))
        for l in failed[:30]:
            print("    " + l)
        print("validation errors: %d line(s)" % sum(
            1 for l in tests.splitlines() if "validation error" in l))
    else:
        print("(no tests stage)")
    print("\n## coopmat self-checks (small known-answer cases)\n")
    coop = read(os.path.join(out, "coopmat.log"))
    if coop:
        # Per VKATTN_FULL_SUBGROUPS run: the counted check lines before its marker.
        chunk = []
        for line in coop.splitlines():
            m = re.match(r"== coopmat self-checks, VKATTN_FULL_SUBGROUPS=(\d)", line)
            if not m:
                chunk.append(line)
                continue
            passed = failed = 0
            for l in chunk:
                n = re.match(r"\s*(\d+) vkattn: self-check family=coopmat (passed|FAILED)", l)
                if n:
                    if n.group(2) == "passed":
                        passed += int(n.group(1))
                    else:
                        failed += int(n.group(1))
            print("- full subgroups %s: %d pipeline check(s) passed, %d failed" %
                  ("on" if m.group(1) == "1" else "off", passed, failed))
            chunk = []
    else:
        print("(no coopmat stage)")
    bench = load_json(os.path.join(out, "bench.json"))
    print("\n## Bench (device table)\n")
    if bench:
        p = bench.get("peaks", {})
        print("peaks: f32 FMA %s GFLOP/s, read %s GB/s, f16 matrices %s GFLOP/s (%s)\n" % (
            fmt(p.get("fma_gflops"), "%.1f"), fmt(p.get("read_gbps"), "%.1f"),
            fmt(p.get("matrix_f16_gflops"), "%.1f"), p.get("matrix_shape") or "none"))
        print("| case | median ms | GFLOP/s | GB/s | bound | % of peak | % of matrix peak | ok |")
        print("|---|---|---|---|---|---|---|---|")
        for c in bench.get("cases", []):
            print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                c["name"], fmt(c.get("median_ms")), fmt(c.get("gflops"), "%.1f"),
                fmt(c.get("gbps"), "%.1f"), c.get("bound") or "-",
                fmt(100 * c["fraction_of_peak"], "%.1f") if c.get("fraction_of_peak") else "-",
                fmt(100 * c["fraction_of_matrix_peak"], "%.1f")
                if c.get("fraction_of_matrix_peak") else "-", c.get("ok")))
    else:
        print("(no bench stage)")
    tuned = load_json(os.path.join(out, "bench_tuned.json"))
    print("\n## Tuned against the device table\n")
    if bench and tuned:
        ratio_table(bench, tuned, "table ms", "tuned ms", "table / tuned")
    else:
        print("(no tune stage)")
    full_torch = load_json(os.path.join(out, "torch.json"))
    print("\n## Every case against PyTorch\n")
    if bench and full_torch:
        ratio_table(full_torch, bench, "torch ms (%s)" % (full_torch.get("backend") or "?"),
                    "vkattn ms", "torch / vkattn", order=bench)
    else:
        print("(no PyTorch run)")
    torch = load_json(os.path.join(out, "torch_prefill.json"))
    print("\n## Prefill: coopmat, tiled and PyTorch\n")
    cm = cases(load_json(os.path.join(out, "bench_prefill_coopmat.json")))
    tl = cases(load_json(os.path.join(out, "bench_prefill_tiled.json")))
    tc = cases(torch)
    if cm or tl:
        print("| case | coopmat ms | tiled ms | torch ms (%s) | torch / coopmat |" %
              ((torch or {}).get("backend") or "none"))
        print("|---|---|---|---|---|")
        for name in sorted(set(cm) | set(tl)):
            c, t, x = cm.get(name, {}), tl.get(name, {}), tc.get(name, {})
            ratio = x["median_ms"] / c["median_ms"] if x.get("median_ms") and c.get(
                "median_ms") else None
            print("| %s | %s%s | %s | %s | %s |" % (
                name, fmt(c.get("median_ms")), "" if c.get("ok", True) else " WRONG",
                fmt(t.get("median_ms")), fmt(x.get("median_ms")), fmt(ratio, "%.2f")))
    else:
        print("(no coopmat bench)")
    print("\n## Tuning file\n")
    files = glob.glob(os.path.join(out, "tuning-*.txt"))
    if files:
        print("    " + "\n    ".join(read(files[0]).splitlines()))
    else:
        print("(none)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
