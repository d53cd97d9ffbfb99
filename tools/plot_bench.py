#!/usr/bin/env python3
"""Bar chart of vkattn-bench results: the fraction of the device's own peak
(the roofline bound the bench reports) per case, one bar per JSON file side
by side (e.g. two devices, or before/after a change).

    python3 tools/plot_bench.py out.png bench-a.json [bench-b.json ...]

Needs Debian's python3-matplotlib.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 1
    out, files = argv[1], argv[2:]
    runs = []
    for path in files:
        with open(path) as f:
            d = json.load(f)
        runs.append((path, d))
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
