#!/usr/bin/env python3
"""Tables of the compiler's statistics for vkattn's pipelines on fake GPUs.

    tools/gpu/static_table.py OUTDIR [--keep-peaks]

Reads OUTDIR/GPU/CASE.log: the stderr of one `vkattn-bench --build-only
--case CASE` run under VKATTN_LOG=stats,kernels(,compile) through
tools/gpu-static.sh GPU (tools/gpu/static_sweep.sh makes them; CASE may carry
a forced family, "prefill-1k-d64@coopmat"). Beside it, optional CASE.rc (the
exit status) and CASE.out (stdout). Writes OUTDIR/static.md (one table per
GPU) and OUTDIR/static.json (everything, the drivers' raw statistics too).

Lines read (anything else is kept as a note):
  vkattn: stats SHADER [s0,s1,...] EXECUTABLE: Name=value; Name=value; ...
  vkattn: compile SHADER [s0,...] [full-subgroups] [subgroup-size N] T ms
  vkattn: attention family=... / vkattn: attention fallback from ...
  vkattn-bench: CASE: <progress>      (attributes lines when a log has several)
  gpu-static: GPU on DRIVER, mesa-vulkan-drivers V, ...
Pipelines of the bench's peak measurements (peak_*) are left out unless
--keep-peaks.

Occupancy is arithmetic on the statistics (GPU-STATIC.md, "What the
statistics mean"): AMD waves/SIMD (wave64) from VGPRs (768 per SIMD on
RDNA3/4, 512 on RDNA2; 16 slots) and LDS (128 KiB per WGP of 4 SIMDs, whole
workgroups); NVIDIA warps/SM from GPRs (65536 per SM in 4 partitions, 8-GPR
granule, 48 warps on sm_86 / 32 on sm_75) and shared memory (100 KiB per SM
on GA10x, 64 KiB on TU10x, 16 workgroups); Adreno: ir3's Max Waves Per Core;
Apple: AGX's Threads (per core, registers only). Shared memory is vkattn's
own "Shared memory bytes" entry where the stats line has one (NAK reports
none), else the driver's LDS size. The workgroup size comes from the shaders
(local_size_x = N, or local_size_x_id = 0: specialization constant 0), and
a shader that declares no shared memory has none.
"""
import json
import math
import os
import re
import sys
from collections import OrderedDict

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# GPU name (tools/gpu-static.sh) -> vendor and the numbers its arithmetic needs.
GPUS = {
    "navi21": {"vendor": "amd", "arch": "RDNA2", "vgpr_file": 512},
    "navi31": {"vendor": "amd", "arch": "RDNA3", "vgpr_file": 768},
    "gfx1201": {"vendor": "amd", "arch": "RDNA4", "vgpr_file": 768},
    "ga102": {"vendor": "nvidia", "arch": "Ampere sm_86", "max_warps": 48, "smem_sm": 100 * 1024},
    "tu104": {"vendor": "nvidia", "arch": "Turing sm_75", "max_warps": 32, "smem_sm": 64 * 1024},
    "a740": {"vendor": "adreno", "arch": "Adreno 740"},
    "a660": {"vendor": "adreno", "arch": "Adreno 660"},
    "m1": {"vendor": "apple", "arch": "Apple M1 (G13G)"},
}

# Per vendor: the driver's statistic names for each column, and the units.
UNITS = {
    "amd": "RADV/ACO. regs: VGPRs per lane (v); spills: VGPRs/SGPRs spilled; scratch: bytes per "
    "wave; occupancy: wave64 waves per SIMD (limit: vgpr, lds, slots); cycles: ACO's latency / "
    "inverse throughput estimates",
    "nvidia": "NVK/NAK. regs: GPRs per thread (r); spills: spills/fills to memory; scratch: SLM "
    "bytes per thread; occupancy: warps per SM (limit: regs, smem, slots); cycles: static cycle "
    "count",
    "adreno": "turnip/ir3. regs: full vec4 registers (q) / half registers; spills: STP/LDP "
    "(private memory stores/loads); occupancy: ir3's Max Waves Per Core; cycles: estimated "
    "cycles stalled on SS / SY",
    "apple": "Honeykrisp/AGX. regs: 16-bit register halves (h); spills: spills/fills; scratch: "
    "bytes per thread; occupancy: threads per core (registers only); cycles: estimated ALU / "
    "FSCIB / IC cycles",
    "unknown": "unknown driver: raw statistics in static.json only",
}

STATS_RE = re.compile(r"^vkattn: stats (\S+) \[([^\]]*)\] (.*)$")
COMPILE_RE = re.compile(r"^vkattn: compile (\S+) \[([^\]]*)\](.*?) ([0-9.]+) ms$")
# "vkattn-bench: CASE: what" or "vkattn-bench: CASE (part): what"
PROGRESS_RE = re.compile(r"^vkattn-bench: ([A-Za-z0-9][A-Za-z0-9.-]*)(?: \([^)]*\))?: (.*)$")
HEADER_RE = re.compile(r"^gpu-static: (\S+) on (\S+), (.*)$")


def number(text):
    """An int or float from a statistic's text, else the text."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def parse_stats(rest):
    """'EXECUTABLE: A=1; B c=2' -> (executable, {A: 1, 'B c': 2})."""
    eq = rest.find("=")
    colon = rest.rfind(":", 0, eq) if eq >= 0 else rest.rfind(":")
    if colon < 0:
        return rest.strip(), {}
    exe, body = rest[:colon].strip(), rest[colon + 1:]
    stats = OrderedDict()
    for item in body.split(";"):
        if "=" in item:
            name, value = item.split("=", 1)
            stats[name.strip()] = number(value.strip())
    return exe, stats


def spec_list(text):
    return [number(s.strip()) for s in text.split(",") if s.strip()]


def scan_shaders():
    """From shaders/*.comp (and their includes): shader name -> (local_size_x,
    or 'spec0' for local_size_x_id = 0; whether it declares shared memory)."""
    found, sdir = {}, os.path.join(REPO, "shaders")
    if not os.path.isdir(sdir):
        return found
    for name in os.listdir(sdir):
        if not name.endswith(".comp"):
            continue
        text = open(os.path.join(sdir, name), encoding="utf-8", errors="replace").read()
        for inc in re.findall(r'#include "([^"]+)"', text):
            path = os.path.join(sdir, "include", inc)
            if os.path.isfile(path):
                text += open(path, encoding="utf-8", errors="replace").read()
        m = re.search(r"local_size_x(_id)?\s*=\s*(\d+)", text)
        wg = None if not m else "spec0" if m.group(1) else int(m.group(2))
        found[name[:-5]] = (wg, re.search(r"^\s*shared\s", text, re.M) is not None)
    return found


SHADERS = scan_shaders()


def workgroup_size(shader, spec, stats):
    for key in ("Workgroup size", "Workgroup invocations"):  # should a driver or vkattn give it
        if isinstance(stats.get(key), int):
            return stats[key]
    wg = SHADERS.get(shader, (None, None))[0]
    if wg == "spec0":
        return spec[0] if spec and isinstance(spec[0], int) and spec[0] > 0 else None
    return wg


def stat(stats, *names):
    """The first of `names` the executable reports (case-insensitive)."""
    low = {k.lower(): v for k, v in stats.items()}
    for n in names:
        if n.lower() in low:
            return low[n.lower()]
    return None


def guess_vendor(stats):
    if stat(stats, "VGPRs") is not None:
        return "amd"
    if stat(stats, "Number of GPRs") is not None:
        return "nvidia"
    if stat(stats, "Max Waves Per Core") is not None:
        return "adreno"
    if stat(stats, "Threads") is not None and stat(stats, "GPRs") is not None:
        return "apple"
    return "unknown"


def fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float):
        return ("%.2f" % x).rstrip("0").rstrip(".")
    return str(x)


def pair(a, b):
    return "-" if a is None and b is None else "%s/%s" % (fmt(a), fmt(b))


def occupancy_amd(gpu, s, shared, wg, wave):
    """wave64 waves per SIMD: VGPR file, 16 slots, LDS per WGP in whole workgroups."""
    vgprs, lds = stat(s, "VGPRs"), stat(s, "LDS size")
    if lds is None:
        lds = shared or 0
    file = gpu.get("vgpr_file")
    if not file or not vgprs:
        return None, None
    scale = 64 // wave if wave in (32, 64) else 1  # a wave32 takes half the file
    limits = {"slots": 16 * scale, "vgpr": (file * scale) // vgprs}
    if lds and wg:
        waves_per_wg = math.ceil(wg / wave)
        limits["lds"] = (128 * 1024 // lds) * waves_per_wg / 4
    elif lds:
        limits["lds?"] = None  # the workgroup size is unknown: not counted
    return best(limits)


def occupancy_nvidia(gpu, s, shared, wg):
    """Warps per SM: registers (4 partitions of 16384, 8-GPR granule), shared memory, 16 groups."""
    gprs = stat(s, "Number of GPRs")
    if not gprs or "max_warps" not in gpu:
        return None, None
    per_warp = math.ceil(gprs / 8) * 8 * 32
    reg_warps = 4 * (16384 // per_warp)
    if not wg:
        return best({"regs": reg_warps, "slots": gpu["max_warps"]})
    wpw = math.ceil(wg / 32)
    groups = {"regs": reg_warps // wpw, "slots": gpu["max_warps"] // wpw, "groups": 16}
    if shared:
        groups["smem"] = gpu["smem_sm"] // shared
    n, limit = best(groups)
    return n * wpw, limit + ("" if shared is not None else ", smem unknown")


def best(limits):
    """(least value, its name(s)) of the limits that are numbers."""
    known = {k: v for k, v in limits.items() if v is not None}
    low = min(known.values())
    return low, "/".join(k for k, v in known.items() if v == low)


def summarize(gpu_name, vendor, shader, spec, stats, wave):
    """The table's columns for one executable (None: not reported)."""
    gpu = GPUS.get(gpu_name, {})
    shared = stat(stats, "Shared memory bytes", "shared")
    if shared is None and vendor == "amd":
        shared = stat(stats, "LDS size")
    if shared is None and SHADERS.get(shader, (None, True))[1] is False:
        shared = 0  # the shader declares no shared memory
    wg = workgroup_size(shader, spec, stats)
    out = {"workgroup_size": wg, "shared_bytes": shared}
    if vendor == "amd":
        occ, why = occupancy_amd(gpu, stats, shared, wg, wave or 64)
        out.update(regs=stat(stats, "VGPRs"), spills=pair(stat(stats, "Spilled VGPRs"),
                   stat(stats, "Spilled SGPRs")), scratch=stat(stats, "Scratch size"),
                   instructions=stat(stats, "Instructions"),
                   cycles=pair(stat(stats, "Latency"), stat(stats, "Inverse Throughput")),
                   occupancy=occ, occupancy_limit=why,
                   driver_occupancy=stat(stats, "Subgroups per SIMD"))
    elif vendor == "nvidia":
        occ, why = occupancy_nvidia(gpu, stats, shared, wg)
        out.update(regs=stat(stats, "Number of GPRs"), spills=pair(stat(stats, "Spills to memory"),
                   stat(stats, "Fills from memory")), scratch=stat(stats, "SLM size"),
                   instructions=stat(stats, "Instruction count"),
                   cycles=fmt(stat(stats, "Static cycle count")), occupancy=occ,
                   occupancy_limit=why, driver_occupancy=stat(stats, "Max warps/SM"))
    elif vendor == "adreno":
        full, half = stat(stats, "Registers used"), stat(stats, "Half-registers used")
        out.update(regs=full if half is None else "%s/%sh" % (fmt(full), fmt(half)),
                   spills=pair(stat(stats, "STP Count"), stat(stats, "LDP Count")), scratch=None,
                   instructions=stat(stats, "Instruction Count"),
                   cycles=pair(stat(stats, "Estimated cycles stalled on SS"),
                               stat(stats, "Estimated cycles stalled on SY")),
                   occupancy=stat(stats, "Max Waves Per Core"), occupancy_limit="ir3")
    elif vendor == "apple":
        alu, fscib, ic = stat(stats, "ALU"), stat(stats, "FSCIB"), stat(stats, "IC")
        out.update(regs=stat(stats, "GPRs"), spills=pair(stat(stats, "Spills"), stat(stats, "Fills")),
                   scratch=stat(stats, "Scratch"), instructions=stat(stats, "Instructions"),
                   cycles="-" if alu is None else "%s/%s/%s" % (fmt(alu), fmt(fscib), fmt(ic)),
                   occupancy=stat(stats, "Threads"), occupancy_limit="regs")
    return out


def parse_log(path, case_from_name, keep_peaks):
    """Pipelines, kernel lines and notes of one log, by case."""
    cases, info = OrderedDict(), {}
    compiles = {}  # (shader, spec text) -> (ms, subgroup size)
    current = None  # the case the progress lines name last

    def bucket(name):
        return cases.setdefault(name, {"pipelines": [], "kernels": OrderedDict(), "notes": []})

    pending = []  # lines before the first case progress line: the log's first case
    for raw in open(path, encoding="utf-8", errors="replace"):
        line = raw.rstrip("\n")
        m = HEADER_RE.match(line)
        if m:
            info["driver"], info["versions"] = m.group(2), m.group(3)
            continue
        m = PROGRESS_RE.match(line)
        if m and m.group(1) == "peaks":
            continue
        if m and "-" in m.group(1):  # bench case names have hyphens, its check()s underscores
            current = m.group(1)
            for item in pending:
                item(bucket(current))
            pending = []
            continue
        m = COMPILE_RE.match(line)
        if m:
            sg = re.search(r"subgroup-size (\d+)", m.group(3))
            compiles[(m.group(1), m.group(2))] = (float(m.group(4)), int(sg.group(1)) if sg else None)
            continue
        item = None
        m = STATS_RE.match(line)
        if m:
            shader, spec_text = m.group(1), m.group(2)
            if shader.startswith("peak_") and not keep_peaks:
                continue
            exe, stats = parse_stats(m.group(3))
            rec = {"shader": shader, "spec": spec_list(spec_text), "spec_text": spec_text,
                   "executable": exe, "stats": stats}
            item = lambda b, rec=rec: b["pipelines"].append(rec)
        elif line.startswith("vkattn: attention "):
            text = line[len("vkattn: "):]
            item = lambda b, t=text: b["kernels"].__setitem__(t, b["kernels"].get(t, 0) + 1)
        elif line.startswith(("vkattn", "gpu-static", "with-mesa26")) or "rror" in line:
            text = line
            item = lambda b, t=text: t in b["notes"] or b["notes"].append(t)
        if item:
            if current is None:
                pending.append(item)
            else:
                item(bucket(current))
    # Lines with no case progress line at all, or before it: the log's case.
    target = bucket(current if current is not None else case_from_name) if pending else None
    for item in pending:
        item(target)
    if case_from_name not in cases and len(cases) == 1:  # one case: name it after the file
        cases = OrderedDict([(case_from_name, list(cases.values())[0])])
    for c in cases.values():
        for p in c["pipelines"]:
            ms, sg = compiles.get((p["shader"], p["spec_text"]), (None, None))
            p["compile_ms"], p["subgroup_size"] = ms, sg
    return cases, info


def read_text(path):
    try:
        return open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return None


def collect(outdir, keep_peaks):
    result = {"gpus": OrderedDict(), "mesa": None}
    order = list(GPUS) + sorted(d for d in os.listdir(outdir) if d not in GPUS)
    for gpu in order:
        gdir = os.path.join(outdir, gpu)
        if not os.path.isdir(gdir):
            continue
        g = {"vendor": GPUS.get(gpu, {}).get("vendor"), "arch": GPUS.get(gpu, {}).get("arch"),
             "device": None, "cases": OrderedDict()}
        for log in sorted(f for f in os.listdir(gdir) if f.endswith(".log")):
            label = log[:-4]
            cases, info = parse_log(os.path.join(gdir, log), label, keep_peaks)
            if info.get("versions") and not result["mesa"]:
                result["mesa"] = info["versions"]
            rc = read_text(os.path.join(gdir, label + ".rc"))
            out = read_text(os.path.join(gdir, label + ".out")) or ""
            m = re.search(r"^device: (.*)$", out, re.M)
            if m and not g["device"]:
                g["device"] = m.group(1)
            for name, c in cases.items():
                key = label if name == label else "%s (in %s)" % (name, label)
                c["rc"] = int(rc) if rc and rc.strip().lstrip("-").isdigit() else None
                c["kernels"] = [{"line": k, "count": n} for k, n in c["kernels"].items()]
                g["cases"][key] = c
        for c in g["cases"].values():
            for p in c["pipelines"]:
                vendor = g["vendor"] or guess_vendor(p["stats"])
                g["vendor"] = g["vendor"] or (vendor if vendor != "unknown" else None)
                p["summary"] = summarize(gpu, vendor, p["shader"], p["spec"], p["stats"],
                                         p["subgroup_size"])
                del p["spec_text"]
        g["vendor"] = g["vendor"] or "unknown"
        result["gpus"][gpu] = g
    return result


def markdown(result):
    md = ["# vkattn pipelines on fake GPUs: compiler statistics", "",
          "Mesa drm-shim fake GPUs (tools/gpu-static.sh; %s). Static counts from the open "
          "compilers (ACO, NAK, ir3, AGX), not timings; occupancy is arithmetic on them. "
          "shared = the workgroup's shared memory in bytes (vkattn's count, else the driver's); "
          "compile = milliseconds in vkCreateComputePipelines." % (result["mesa"] or "Mesa ?"), ""]
    cols = ["case", "pipeline", "wg", "regs", "spills", "scratch", "shared", "occupancy",
            "instrs", "cycles", "compile ms"]
    for gpu, g in result["gpus"].items():
        title = ", ".join(x for x in (g["arch"], g["device"]) if x)
        md += ["## %s%s" % (gpu, " — " + title if title else ""), "",
               UNITS.get(g["vendor"], UNITS["unknown"]) + ".", "",
               "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
        for case, c in g["cases"].items():
            first = True
            if not c["pipelines"]:
                md.append("| %s | (no statistics) |%s" % (case, " |" * (len(cols) - 2)))
            multi = len({(p["shader"], str(p["spec"])) for p in c["pipelines"]}) < len(c["pipelines"])
            for p in c["pipelines"]:
                s = p["summary"]
                name = "%s [%s]" % (p["shader"], ",".join(fmt(x) for x in p["spec"]))
                if multi:
                    name += " " + p["executable"]
                occ = s.get("occupancy")
                occ = "-" if occ is None else fmt(occ) + (
                    " (%s)" % s["occupancy_limit"] if s.get("occupancy_limit") else "")
                md.append("| " + " | ".join([
                    case if first else "", name, fmt(s.get("workgroup_size")), fmt(s.get("regs")),
                    s.get("spills") or "-", fmt(s.get("scratch")), fmt(s.get("shared_bytes")), occ,
                    fmt(s.get("instructions")), s.get("cycles") or "-",
                    "%.0f" % p["compile_ms"] if p["compile_ms"] is not None else "-"]) + " |")
                first = False
        md += ["", "Kernel choices (VKATTN_LOG=kernels) and notes:", ""]
        for case, c in g["cases"].items():
            kern = sorted({k["line"] for k in c["kernels"]})
            rc = "" if c["rc"] in (0, None) else " (exit status %d)" % c["rc"]
            md.append("- **%s**%s: %s" % (case, rc, "; ".join(kern) if kern else "no attention dispatch logged"))
            for n in c["notes"][:5]:
                md.append("  - `%s`" % n.replace("`", "'"))
            if len(c["notes"]) > 5:
                md.append("  - (%d more notes in static.json)" % (len(c["notes"]) - 5))
        md.append("")
    return "\n".join(md)


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 1 or any(a not in ("--keep-peaks",) for a in argv[1:] if a.startswith("--")):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    outdir = args[0]
    if not os.path.isdir(outdir):
        print("static_table: no folder %s (static_sweep.sh's OUTDIR)" % outdir, file=sys.stderr)
        return 1
    result = collect(outdir, "--keep-peaks" in argv)
    if not result["gpus"]:
        print("static_table: no OUTDIR/GPU/*.log under %s" % outdir, file=sys.stderr)
        return 1
    with open(os.path.join(outdir, "static.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    with open(os.path.join(outdir, "static.md"), "w") as f:
        f.write(markdown(result) + "\n")
    n = sum(len(c["pipelines"]) for g in result["gpus"].values() for c in g["cases"].values())
    print("static_table: %d GPUs, %d executables -> %s/static.md, static.json"
          % (len(result["gpus"]), n, outdir), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
