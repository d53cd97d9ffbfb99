#!/usr/bin/env python3
"""Bar chart of vkattn-bench results: the fraction of the device's own peak
(the roofline bound the bench reports) per case, one bar per JSON file side
by side (e.g. two devices, or before/after a change).

    python3 tools/plot_bench.py out.png bench-a.json [bench-b.json ...]

Needs Debian's python3-matplotlib. The arguments and the JSON files are
checked first: out.png must name an image (.png, .svg or .pdf) that is none
of the inputs, so a forgotten out.png cannot overwrite a JSON file; a file
that is missing or not vkattn-bench's JSON, or no matplotlib, is an error
(exit 1) saying so.
"""
import json
import os
import sys

IMAGES = (".png", ".svg", ".pdf")


def load(path):
    """vkattn-bench --json's object; ValueError/OSError for a file that is not one."""
    with open(path) as f:
        d = json.load(f)
    ok = isinstance(d, dict) and isinstance(d.get("cases"), list) and \
        isinstance(d.get("peaks"), dict) and isinstance(d.get("device"), dict)
    if ok:
        ok = all(isinstance(c, dict) and {"name", "fraction_of_peak", "bound"} <= set(c)
                 for c in d["cases"]) and {"fma_gflops", "read_gbps"} <= set(d["peaks"])
    if not ok:
        raise ValueError("not vkattn-bench --json's output (device, peaks, cases)")
    return d


def main(argv):
    if len(argv) < 3 or any(a.startswith("-") for a in argv[1:]):
        print(__doc__.strip(), file=sys.stderr)
        return 1
    out, files = argv[1], argv[2:]
    if not out.lower().endswith(IMAGES):
        print("plot_bench: the first argument is the image to write (%s), not %s" %
              (", ".join(IMAGES), out), file=sys.stderr)
        return 2
    if any(os.path.abspath(out) == os.path.abspath(p) for p in files):
        print("plot_bench: %s is an input; the image would overwrite it" % out, file=sys.stderr)
        return 2
    runs = []
    for path in files:
        try:
            runs.append((path, load(path)))
        except (OSError, ValueError) as e:
            print("plot_bench: %s: %s" % (path, e.strerror if isinstance(e, OSError) else e),
                  file=sys.stderr)
            return 1
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print("plot_bench: needs matplotlib (Debian: python3-matplotlib): %s" % e, file=sys.stderr)
        return 1
    names = []
    for _, d in runs:
        for c in d["cases"]:
            if c["name"] not in names:
                names.append(c["name"])
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(names) + 2), 5))
    for i, (path, d) in enumerate(runs):
        by = {c["name"]: c for c in d["cases"]}
        xs = [j + (i - (len(runs) - 1) / 2) * width for j in range(len(names))]
        ys = [100 * by[n]["fraction_of_peak"] if n in by else 0 for n in names]
        p = d["peaks"]
        label = "%s (FMA %.0f GFLOP/s, read %.1f GB/s)" % (
            d["device"]["name"], p["fma_gflops"], p["read_gbps"])
        if len(runs) > 1:
            label = "%s: %s" % (path, label)
        bars = ax.bar(xs, ys, width, label=label)
        for b, n in zip(bars, names):
            if n in by:
                ax.annotate(by[n]["bound"], (b.get_x() + b.get_width() / 2, b.get_height()),
                            ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_ylabel("% of the device's measured peak (roofline bound)")
    ax.set_title("vkattn-bench: fraction of peak per case")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
