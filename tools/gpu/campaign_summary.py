#!/usr/bin/env python3
"""The budgeted GPU campaign's summary (tools/gpu/campaign.sh):
    python3 tools/gpu/campaign_summary.py OUTDIR > OUTDIR/summary.md
The device and driver, then one section per question, in the campaign's
order: a heading and its table, or one line saying "skipped for time" or
"not applicable" and why (read from OUTDIR/steps.log). Any file may be
missing: the summary is rewritten after every step, so a cut-off run
still leaves one.
"""
import glob
import json
import os
import re
import sys

SECTIONS = [
    ("1. Decode: the table's choice in processes A B A B, forced runs, PyTorch",
     ["facts", "q1_decode_a", "q1_decode_forced_plan_host", "q1_decode_b", "q1_torch",
      "q1_decode_tiled", "q1_decode_a2", "q1_decode_b2", "q1_decode_forced_log",
      "q1_decode", "q1_decode_again"]),
    ("2. coopmat and prefill", ["q2_coopmat_checks", "q2_prefill", "q2_prefill_tiled",
                                "q2_prefill_coopmat", "q2_prefill_b", "q2_prefill_coopmat_oregs1",
                                "q2_prefill_coopmat_nobalance"]),
    ("3. The driver's pipeline statistics", []),
    ("4. Tuning", ["q4_tune", "q4_tuned"]),
    ("5. Suites with the validation layer on", ["q5_tests"]),
]


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return None


def load(out, name):
    text = read(os.path.join(out, name + ".json"))
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def cases(d):
    return {c["name"]: c for c in (d or {}).get("cases", [])}


def fmt(x, spec="%.3f"):
    return spec % x if isinstance(x, (int, float)) else "-"


def pct(c, key="fraction_of_peak"):
    v = (c or {}).get(key)
    return "%.1f %%" % (100 * v) if isinstance(v, (int, float)) else "-"


def step_lines(steps):
    """steps.log: {step name: its line} (measured, skipped or not applicable)."""
    out = {}
    for line in (steps or "").splitlines():
        m = re.match(r"== (\S+) (.*)", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def status(lines, names):
    """The steps' lines, for a section that has no table."""
    said = ["`%s` %s" % (n, lines[n]) for n in names if n in lines]
    return "; ".join(said)


def spread(c):
    lo, hi = c.get("min_ms"), c.get("max_ms")
    return "%.3f-%.3f" % (lo, hi) if isinstance(lo, (int, float)) and isinstance(
        hi, (int, float)) else "-"


# The default-choice processes of step 1, in order (older campaigns:
# q1_decode and q1_decode_again).
DEFAULT_DECODE = ["q1_decode_a", "q1_decode_b", "q1_decode_a2", "q1_decode_b2"]


def decode_section(out, lines):
    runs = [(n, cases(load(out, n))) for n in DEFAULT_DECODE]
    runs = [(n, c) for n, c in runs if c]
    if not runs:  # an older campaign's two processes
        runs = [(n, cases(load(out, n))) for n in ("q1_decode", "q1_decode_again")]
        runs = [(n, c) for n, c in runs if c]
    if not runs:
        return False
    host = cases(load(out, "q1_decode_forced_plan_host"))
    tiled, torch = cases(load(out, "q1_decode_tiled")), cases(load(out, "q1_torch"))
    print("vkattn-bench medians (GPU timestamps, answers verified first) of the table's choice in "
          "each default-choice process (%s; no VKATTN_* knob); spread = the slowest process's "
          "median over the fastest's; %% of peak = the slowest process's fraction_of_peak; "
          "plan host = VKATTN_PLAN_MEMORY=host forced; torch / worst = PyTorch's median over "
          "vkattn's slowest.\n" % ", ".join(n for n, _ in runs))
    head = " | ".join("%s ms" % n.replace("q1_decode_", "") for n, _ in runs)
    print("| case | %s | spread | %% of peak (worst) | plan host ms | tiled ms | torch ms | "
          "torch / worst | kernel |" % head)
    print("|---|" + "---|" * len(runs) + "---|---|---|---|---|---|---|")
    names = list(dict.fromkeys(n for _, c in runs for n in c))
    for name in names:
        per = [c.get(name, {}) for _, c in runs]
        ms = [p.get("median_ms") for p in per if isinstance(p.get("median_ms"), (int, float))]
        worst = max(per, key=lambda p: p.get("median_ms") or 0)
        wrong = any(p and not p.get("ok", True) for p in per)
        x = torch.get(name, {}).get("median_ms")
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, " | ".join(fmt(p.get("median_ms")) for p in per) + (" WRONG" if wrong else ""),
            fmt(max(ms) / min(ms), "%.2f") if ms and min(ms) > 0 else "-", pct(worst),
            fmt(host.get(name, {}).get("median_ms")), fmt(tiled.get(name, {}).get("median_ms")),
            fmt(x), fmt(x / max(ms), "%.2f") if x and ms else "-",
            (worst.get("variant") or "").split(";")[0]))
    return True


def prefill_section(out, lines):
    checks = read(os.path.join(out, "q2_coopmat_checks.log"))
    if checks is not None:
        passed = len(re.findall(r"self-check family=coopmat passed", checks))
        failed = len(re.findall(r"self-check family=coopmat FAILED", checks))
        print("coopmat self-checks (attention suite's head-dim and GQA cases, checks in memory): "
              "%d passed, %d failed.\n" % (passed, failed))
    table, tiled = cases(load(out, "q2_prefill")), cases(load(out, "q2_prefill_tiled"))
    coop, torch = cases(load(out, "q2_prefill_coopmat")), cases(load(out, "q1_torch"))
    table_b = cases(load(out, "q2_prefill_b"))
    oregs1 = cases(load(out, "q2_prefill_coopmat_oregs1"))
    nobal = cases(load(out, "q2_prefill_coopmat_nobalance"))
    if not (table or tiled or coop):
        return checks is not None
    print("| case | table ms A / B | runs | % of FMA peak | % of matrix peak | tiled ms | "
          "coopmat ms | coopmat O_REGS=1 ms | coopmat unbalanced ms | torch ms | "
          "torch / worst table | table's kernel |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in list(dict.fromkeys(list(table) + list(tiled) + list(coop))):
        c, t, k, x = table.get(name, {}), tiled.get(name, {}), coop.get(name, {}), torch.get(name, {})
        b = table_b.get(name, {})
        m = c.get("median_ms")
        worst = max([v for v in (m, b.get("median_ms")) if v] or [0]) or None

        def ms(d):
            return fmt(d.get("median_ms")) + ("" if d.get("ok", True) else " WRONG")
        print("| %s | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, fmt(m), fmt(b.get("median_ms")), spread(c) if c else "-", pct(c),
            pct(c, "fraction_of_matrix_peak"), fmt(t.get("median_ms")), ms(k),
            ms(oregs1.get(name, {})), ms(nobal.get(name, {})), fmt(x.get("median_ms")),
            fmt(x["median_ms"] / worst, "%.2f") if x.get("median_ms") and worst else "-",
            (c.get("variant") or "").split(";")[0]))
    return True


def stats_section(out, lines, info):
    if info and "pipeline statistics (VKATTN_LOG=stats): no" in info:
        print("not applicable: the driver offers no VK_KHR_pipeline_executable_properties "
              "(vkattn-info)")
        return True
    rows = {}
    for name in ["q1_decode_forced_log", "q1_decode", "q1_decode_tiled", "q1_decode_again",
                 "q2_prefill", "q2_prefill_tiled", "q2_prefill_coopmat",
                 "q2_prefill_coopmat_oregs1", "q4_tuned"]:
        for c in cases(load(out, name)).values():
            for p in c.get("pipelines") or []:
                key = (p.get("shader"), json.dumps(p.get("spec")), p.get("executable"))
                rows.setdefault(key, (p.get("stats") or {}, c["name"]))
    if not rows:
        return False
    names = []
    for stats, _ in rows.values():
        for n in stats:
            if n not in names:
                names.append(n)
    print("| pipeline | spec | executable | first case | " + " | ".join(names) + " |")
    print("|---|---|---|---|" + "---|" * len(names))
    for (shader, spec, exe), (stats, case) in sorted(rows.items(), key=lambda r: str(r[0])):
        print("| %s | %s | %s | %s | %s |" % (shader, spec, exe, case,
                                              " | ".join(str(stats.get(n, "-")) for n in names)))
    return True


def tune_section(out, lines):
    table = {**cases(load(out, "q1_decode_a") or load(out, "q1_decode")),
             **cases(load(out, "q2_prefill"))}
    tuned = cases(load(out, "q4_tuned"))
    if not tuned:
        return False
    print("| case | table ms (steps 1-2) | tuned ms | table / tuned | tuned kernel |")
    print("|---|---|---|---|---|")
    for name, c in tuned.items():
        m = table.get(name, {}).get("median_ms")
        print("| %s | %s | %s | %s | %s |" % (
            name, fmt(m), fmt(c.get("median_ms")),
            fmt(m / c["median_ms"], "%.2f") if m and c.get("median_ms") else "-",
            (c.get("variant") or "").split(";")[0]))
    files = glob.glob(os.path.join(out, "tuning-*.txt"))
    if files:
        print("\nTuning file (%s):\n" % os.path.basename(files[0]))
        print("    " + "\n    ".join((read(files[0]) or "").splitlines()))
    return True


def tests_section(out, lines):
    logs = sorted(glob.glob(os.path.join(out, "q5_*.log")))
    if not logs:
        return False
    print("| suite | exit | passed | failed | validation messages |")
    print("|---|---|---|---|---|")
    failed_lines = []
    for f in logs:
        text = read(f) or ""
        m = re.search(r"^== \S+ exit (\d+)", text, re.M)
        p = re.search(r"^\[  PASSED  \] (\d+) test", text, re.M)
        fl = sorted(set(re.findall(r"^\[  FAILED  \] (\S+)", text, re.M)))
        failed_lines += fl
        rc = m.group(1) if m else "none"
        if rc in ("124", "137"):
            rc += " (cut at its limit; last started: %s)" % (
                (re.findall(r"^\[ RUN      \] (\S+)", text, re.M) or ["-"])[-1])
        print("| %s | %s | %s | %s | %d |" % (
            os.path.basename(f)[3:-4], rc, p.group(1) if p else "-", len(fl),
            sum(1 for l in text.splitlines() if "validation error" in l.lower() or
                "VUID-" in l)))
    if failed_lines:
        print("\nfailed: " + ", ".join(failed_lines))
    return True


def check(path):
    """--check SUMMARY: every question has a section that is measured (a
    table), skipped for time or not applicable, and at least one is
    measured (the dry run's ctest)."""
    text = read(path) or ""
    parts = re.split(r"^## ", text, flags=re.M)
    found = {p.splitlines()[0]: p for p in parts[1:]}
    measured, bad = 0, []
    for title, _ in SECTIONS:
        body = found.get(title)
        if body is None:
            bad.append("no section '%s'" % title)
        elif re.search(r"^\|---", body, re.M):
            measured += 1
        elif not re.search(r"skipped for time|not applicable|exit \d+", body):
            bad.append("section '%s' neither measured nor skipped nor not applicable" % title)
    if "## Device" not in text:
        bad.append("no device section")
    if measured == 0:
        bad.append("no question measured")
    for b in bad:
        print("campaign_summary.py --check: " + b, file=sys.stderr)
    print("%s: %d of %d questions measured, the rest skipped or not applicable" %
          (path, measured, len(SECTIONS)))
    return 1 if bad else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        if not os.path.isfile(argv[2]):
            print("campaign_summary.py --check: no file %s" % argv[2], file=sys.stderr)
            return 1
        return check(argv[2])
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 1
    out = argv[1]
    if not os.path.isdir(out):
        print("campaign_summary.py: no folder %s (the campaign's OUTDIR)" % out, file=sys.stderr)
        return 1
    steps = read(os.path.join(out, "steps.log"))
    lines = step_lines(steps)
    info = read(os.path.join(out, "info.log"))
    print("# GPU campaign summary\n")
    print("## Device\n")
    if info:
        seen = set()
        for line in info.splitlines():
            if (re.match(r"^(device \d+:|default device:|device row:|\S.*, \d+ MiB$)", line) or
                    "pipeline statistics (VKATTN_LOG=stats)" in line) and line.strip() not in seen:
                seen.add(line.strip())
                print("    " + line.strip())
    else:
        print("no device information: " + lines.get("info", "the info step did not run"))
    print()
    facts = read(os.path.join(out, "facts.log"))
    if facts:  # step 0: IOMMU, NUMA, BAR1, vkattn's memory types (a few lines each)
        print("Machine facts (facts.log):\n")
        for block in re.split(r"^== ", facts, flags=re.M)[1:]:
            head, _, body = block.partition("\n")
            body = [l.strip() for l in body.splitlines() if l.strip()][:4]
            print("    %s: %s" % (head.strip(), " / ".join(body) or "-"))
        print()
    first = (steps or "").splitlines()[:1]
    if first:
        print(first[0] + "; " + (lines.get("torch") and "PyTorch " + lines["torch"] or
                                 "PyTorch with CUDA found") + ".")
    for title, names in SECTIONS:
        print("\n## %s\n" % title)
        if title.startswith("1."):
            done = decode_section(out, lines)
        elif title.startswith("2."):
            done = prefill_section(out, lines)
        elif title.startswith("3."):
            done = stats_section(out, lines, info)
        elif title.startswith("4."):
            done = tune_section(out, lines)
        else:
            done = tests_section(out, lines)
        said = status(lines, names)
        if not done:
            if not said and title.startswith("3."):
                said = "no statistics: no bench step of 1-2 left a JSON file"
            print(said or "not run yet (the campaign was cut off before this question)")
        elif said:
            print("\nsteps: " + said)
    clocks = read(os.path.join(out, "clocks.csv"))
    if clocks:
        sm, mem = [], []
        for l in clocks.splitlines():
            f = [x.strip() for x in l.split(",")]
            if len(f) >= 3:
                try:
                    sm.append(float(f[1].split()[0]))
                    mem.append(float(f[2].split()[0]))
                except (ValueError, IndexError):
                    pass
        if sm:
            print("\n## Clocks during the campaign (nvidia-smi, every 0.5 s)\n")
            print("SM %d-%d MHz, memory %d-%d MHz over %d samples (clocks.csv)." %
                  (min(sm), max(sm), min(mem), max(mem), len(sm)))
    util = read(os.path.join(out, "util.csv"))
    if util:
        busy, used = [], []
        for l in util.splitlines():
            f = [x.strip() for x in l.split(",")]
            if len(f) >= 4:
                try:
                    busy.append(float(f[1].split()[0]))
                    used.append(float(f[3].split()[0]))
                except (ValueError, IndexError):
                    pass
        if busy:
            print("GPU utilization %d-%d %% (%d of %d samples busy), memory in use %d-%d MiB "
                  "(util.csv; a floor above 0 MiB while no step runs is not vkattn's)." %
                  (min(busy), max(busy), sum(1 for b in busy if b > 0), len(busy), min(used),
                   max(used)))
    done = [l for l in (steps or "").splitlines() if l.startswith("done in")]
    print("\n" + (done[0] if done else "The campaign has not finished (or was cut off)."))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
