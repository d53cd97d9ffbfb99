#!/usr/bin/env python3
"""Checks the fake GPUs' compiler statistics against vkattn's budgets.

    tools/gpu/static_budgets.py STATIC_JSON BUDGETS

STATIC_JSON: tools/gpu/static_table.py's static.json (tools/gpu/static_sweep.sh).
BUDGETS: tools/gpu/static_budgets.txt, one budget a line:

    GPU  CASE  PIPELINE  METRIC  OP  BOUND  [# why]

GPU, CASE and PIPELINE (the shader name) are shell globs over
vkattn's own choices; a run with a family forced ("case@family") counts
only for a CASE that names a family. METRIC is
a statistic under the driver's own name ("Spilled VGPRs", "Spills to
memory", ...) or a column of static_table.py's summary ("occupancy",
"regs", "scratch", "shared_bytes"); OP is one of == <= >=. A budget whose
cases the sweep ran but that matches no pipeline fails (a renamed shader must
not silence a budget; one over cases the sweep did not run is skipped,
and says so). Every run must have built at least one attention
pipeline and logged no vkattn error. Exit status 0 when every budget holds;
a file that is missing or malformed is an error (exit 1) naming it.
"""
import fnmatch
import json
import sys

OPS = {"==": lambda a, b: a == b, "<=": lambda a, b: a <= b, ">=": lambda a, b: a >= b}


def load_budgets(path):
    out = []
    for n, line in enumerate(open(path), 1):
        text, _, why = line.partition("#")
        f = text.split()
        if not f:
            continue
        # METRIC may hold spaces: the fields are GPU CASE PIPELINE METRIC... OP BOUND.
        if len(f) < 6 or f[-2] not in OPS:
            sys.exit("%s:%d: want GPU CASE PIPELINE METRIC OP BOUND, got %r" % (path, n, line))
        out.append({"gpu": f[0], "case": f[1], "pipe": f[2], "metric": " ".join(f[3:-2]),
                    "op": f[-2], "bound": float(f[-1]), "why": why.strip(), "line": n})
    return out


def metric(p, name):
    if name in p.get("stats", {}):
        return p["stats"][name]
    return p.get("summary", {}).get(name)


def main():
    if len(sys.argv) != 3 or any(a.startswith("-") for a in sys.argv[1:]):
        sys.exit(__doc__)
    try:
        data = json.load(open(sys.argv[1]))
        if not isinstance(data, dict) or not isinstance(data.get("gpus"), dict):
            raise ValueError("not static_table.py's static.json (no \"gpus\")")
    except (OSError, ValueError) as e:
        sys.exit("static_budgets: %s: %s" % (sys.argv[1], e.strerror if isinstance(e, OSError) else e))
    try:
        budgets = load_budgets(sys.argv[2])
    except (OSError, ValueError) as e:
        sys.exit("static_budgets: %s: %s" % (sys.argv[2], e.strerror if isinstance(e, OSError) else e))
    gpus = data["gpus"]
    failed = 0
    for g, gd in gpus.items():
        for case, cd in gd["cases"].items():
            attn = [p for p in cd.get("pipelines", []) if p["shader"].startswith("attention_")]
            errors = [x for x in cd.get("notes", []) if "error" in str(x).lower()]
            if not attn or errors or cd.get("rc", 0) not in (0, None):
                print("FAIL %s %s: %s" % (g, case, errors or "no attention pipeline built" if not attn
                                          else "exit status %s" % cd.get("rc")))
                failed += 1
    for b in budgets:
        matched = bad = cases_ran = 0
        for g, gd in gpus.items():
            if not fnmatch.fnmatch(g, b["gpu"]):
                continue
            for case, cd in gd["cases"].items():
                if "@" in case and "@" not in b["case"]:
                    continue  # forced-family runs only where the budget names a family
                if not fnmatch.fnmatch(case, b["case"]):
                    continue
                cases_ran += 1
                for p in cd.get("pipelines", []):
                    if not fnmatch.fnmatch(p["shader"], b["pipe"]):
                        continue
                    v = metric(p, b["metric"])
                    if v is None:
                        continue
                    matched += 1
                    if not OPS[b["op"]](float(v), b["bound"]):
                        bad += 1
                        print("FAIL %s %s %s [%s]: %s = %s, budget %s %g (line %d%s)" % (
                            g, case, p["shader"], ",".join(map(str, p["spec"][:3])), b["metric"], v,
                            b["op"], b["bound"], b["line"], ": " + b["why"] if b["why"] else ""))
        failed += bad
        # A budget over cases this sweep ran that matches no pipeline fails
        # (a renamed shader or statistic must not silence it); one over
        # cases it did not run (the --quick subset) is skipped, and says so.
        if cases_ran and not matched:
            failed += 1
            print("FAIL budget line %d (%s %s %s %s) matched no pipeline" % (
                b["line"], b["gpu"], b["case"], b["pipe"], b["metric"]))
        elif not cases_ran:
            print("--   line %d: %s %s: no such run in this sweep" % (b["line"], b["gpu"], b["case"]))
        elif not bad:
            print("ok   line %d: %s %s %s %s %s %g (%d pipeline(s))" % (
                b["line"], b["gpu"], b["case"], b["pipe"], b["metric"], b["op"], b["bound"], matched))
    print("%d budget check(s) failed" % failed if failed else "every budget holds")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
