#!/usr/bin/env python3
"""vkattn-bench's cases through PyTorch, for a side by side on one device:

    python3 tools/bench_torch.py [--json FILE] [--reps N] [--case GLOB]... [--device cuda|cpu]
    python3 tools/compare_bench.py vkattn.json torch.json

Each case is the same shape as in vkattn-bench (examples/bench): heads, head
dim, per-sequence (new tokens t, keys u), bottom-right causal as vkattn
means it (query i of a sequence sees keys <= u - t + i). Sequences of equal
(t, u) run as one batch; others one call each (what a PyTorch user without a
varlen kernel does). Per case the backend that ran is printed and stored:
  sdpa-flash / sdpa-efficient / sdpa-math  torch >= 2.0,
      F.scaled_dot_product_attention with that backend forced (the first
      that accepts the call, in this order); t < u uses
      torch.nn.attention.bias.causal_lower_right where it exists (2.1+),
      else an explicit bottom-right mask;
  explicit  torch < 2.0 (Debian 12 has 1.13): softmax(q k^T * scale) v.
GQA: enable_gqa where SDPA has it (2.5+), else K/V repeated per query head
(the repeat is timed: it is part of what such a user pays).
Times: CUDA events (median of --reps after a warm-up), or wall clock on CPU.
Numbers count only visible pairs, like vkattn-bench. Each case is checked
against an explicit f32 attention of its first call (max_err, ok). JSON: the
shape of vkattn-bench --json (no peaks: fraction_of_peak is null).
The arguments are read before PyTorch is imported: a bad one is refused
(exit 2), and a machine without PyTorch gets an error saying so (exit 1).
"""
import argparse
import fnmatch
import json
import math
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # main() says so after reading the arguments
    torch = F = None
    TORCH_MISSING = str(e)

GQA = (32, 8, 128)  # H, Hkv, d of the GQA cases


def cases():
    c = []
    c.append(("prefill-1k-8h-causal", 8, 8, 128, True, [(1024, 1024)], 1))
    c.append(("prefill-1k-8h", 8, 8, 128, False, [(1024, 1024)], 1))
    c.append(("prefill-2k-gqa", *GQA, True, [(2048, 2048)], 1))
    c.append(("prefill-1k-d64", 8, 8, 64, True, [(1024, 1024)], 1))
    c.append(("prefill-1k-d256", 8, 8, 256, True, [(1024, 1024)], 1))
    c.append(("chunk-512-over-1536", *GQA, True, [(512, 2048)], 1))
    c.append(("decode-1x4096", *GQA, True, [(1, 4097)], 1))
    c.append(("decode-16x2048", *GQA, True, [(1, 2049)] * 16, 1))
    c.append(("decode-16x2048-gqa8", 64, 8, 128, True, [(1, 2049)] * 16, 1))
    c.append(("decode-16x512", *GQA, True, [(1, 513)] * 16, 1))
    # vkattn reads decode-8x32768-paged from shuffled caller pages; SDPA
    # reads the same keys dense (its best case).
    c.append(("decode-1x32768", *GQA, True, [(1, 32768)], 1))
    c.append(("decode-8x32768-paged", *GQA, True, [(1, 32768)] * 8, 1))
    mixed = [(1, 513 + 325 * i) for i in range(12)] + [(256, 1280)]
    c.append(("mixed-step", *GQA, True, mixed, 1))
    # A serving loop's step (vkattn-bench serving-step): 32 decodes over
    # 512-8192 cached keys and a 512-token chunk over 1536; PyTorch runs it
    # as the sum of its parts (one SDPA call per distinct shape).
    serving = [(1, 513 + 7680 * i // 31) for i in range(32)] + [(512, 2048)]
    c.append(("serving-step", *GQA, True, serving, 1))
    c.append(("layers-32", *GQA, True, [(1, 513)] * 16, 32))
    # Forks over a shared prompt (issue CS): SDPA reads every fork's keys,
    # the shared prompt included, as vkattn does before cascade.
    c.append(("shared-prefix-16x4096", *GQA, True, [(1, 4096 + 64 + 1)] * 16, 1))
    c.append(("beam-4x2048", *GQA, True, [(1, 2048 + 16 + 1)] * 4, 1))
    return c


def work(H, Hkv, d, causal, seqs):
    pairs = keys = 0
    for t, u in seqs:
        pairs += sum(max(0, u - t + i + 1) for i in range(t)) if causal else t * u
        keys += u
    return pairs * H * 4.0 * d, keys * Hkv * d * 2.0 * 2.0


def bottom_right_mask(t, u, device):
    i = torch.arange(t, device=device).unsqueeze(1)
    j = torch.arange(u, device=device).unsqueeze(0)
    return j <= (u - t + i)  # True = visible


HAS_SDPA = F is not None and hasattr(F, "scaled_dot_product_attention")


def sdpa_contexts(device):
    """(name, context factory) per backend, most specific first."""
    if device != "cuda":
        return [("sdpa-math", None)]
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        return [("sdpa-flash", lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)),
                ("sdpa-efficient", lambda: sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION)),
                ("sdpa-math", lambda: sdpa_kernel(SDPBackend.MATH))]
    except ImportError:
        k = torch.backends.cuda.sdp_kernel
        return [("sdpa-flash", lambda: k(enable_flash=True, enable_math=False, enable_mem_efficient=False)),
                ("sdpa-efficient", lambda: k(enable_flash=False, enable_math=False, enable_mem_efficient=True)),
                ("sdpa-math", lambda: k(enable_flash=False, enable_math=True, enable_mem_efficient=False))]


def make_call(backend_ctx, q, k, v, t, u, causal, H, Hkv):
    """A no-argument function running one attention call; q [B,H,t,d], k/v [B,Hkv,u,d]."""
    kwargs = {}
    gqa_native = False
    if HAS_SDPA and H != Hkv:
        try:
            F.scaled_dot_product_attention(q[:, :, :1], k[:, :, :1], v[:, :, :1], enable_gqa=True)
            gqa_native = True
            kwargs["enable_gqa"] = True
        except TypeError:
            pass
    mask = None
    is_causal = False
    if causal and t == u:
        is_causal = True
    elif causal:
        try:
            from torch.nn.attention.bias import causal_lower_right

            mask = causal_lower_right(t, u)
        except ImportError:
            mask = bottom_right_mask(t, u, q.device)

    def expand(x):
        return x if gqa_native or H == Hkv else x.repeat_interleave(H // Hkv, dim=1)

    if not HAS_SDPA:
        scale = 1.0 / math.sqrt(q.shape[-1])
        bool_mask = bottom_right_mask(t, u, q.device) if causal else None

        def run():
            s = torch.matmul(q, expand(k).transpose(-1, -2)) * scale
            if bool_mask is not None:
                s = s.masked_fill(~bool_mask, float("-inf"))
            return torch.matmul(torch.softmax(s.float(), dim=-1).to(q.dtype), expand(v))

        return run

    def run():
        if backend_ctx is None:
            return F.scaled_dot_product_attention(q, expand(k), expand(v), attn_mask=mask,
                                                  is_causal=is_causal, **kwargs)
        with backend_ctx():
            return F.scaled_dot_product_attention(q, expand(k), expand(v), attn_mask=mask,
                                                  is_causal=is_causal, **kwargs)

    return run


def reference(q, k, v, t, u, causal, H, Hkv):
    q, k, v = q.float(), k.float().repeat_interleave(H // Hkv, dim=1), v.float().repeat_interleave(H // Hkv, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~bottom_right_mask(t, u, q.device), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def run_case(case, device, dtype, reps):
    name, H, Hkv, d, causal, seqs, repeat = case
    groups = {}
    for t, u in seqs:
        groups[(t, u)] = groups.get((t, u), 0) + 1
    gen = torch.Generator(device="cpu").manual_seed(1)
    tensors = []
    for (t, u), b in groups.items():
        q = torch.randn(b, H, t, d, generator=gen).to(device=device, dtype=dtype)
        k = torch.randn(b, Hkv, u, d, generator=gen).to(device=device, dtype=dtype)
        v = torch.randn(b, Hkv, u, d, generator=gen).to(device=device, dtype=dtype)
        tensors.append((q, k, v, t, u))
    backend, calls, out0 = None, None, None
    options = sdpa_contexts(device) if HAS_SDPA else [("explicit", None)]
    for bname, ctx in options:
        try:
            fns = [make_call(ctx, q, k, v, t, u, causal, H, Hkv) for q, k, v, t, u in tensors]
            out0 = fns[0]()
            backend, calls = bname, fns
            break
        except RuntimeError:
            continue
    if calls is None:
        raise RuntimeError("no attention backend accepted " + name)
    q, k, v, t, u = tensors[0]
    ref = reference(q, k, v, t, u, causal, H, Hkv)
    max_err = (out0.float() - ref).abs().max().item()

    def step():
        for _ in range(repeat):
            for fn in calls:
                fn()

    step()  # warm-up
    times = []
    for _ in range(reps):
        if device == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            step()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        else:
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
    ms = statistics.median(times)
    flops, kv_bytes = work(H, Hkv, d, causal, seqs)
    flops *= repeat
    kv_bytes *= repeat
    tol = 2e-2 if dtype == torch.float16 else 1e-4
    return {"name": name, "median_ms": ms, "gflops": flops / (ms * 1e6), "gbps": kv_bytes / (ms * 1e6),
            "bound": None, "fraction_of_peak": None, "max_err": max_err, "ok": max_err <= tol,
            "backend": backend, "calls_per_step": len(calls) * repeat}


def reps_arg(text):
    n = int(text) if text.isdigit() else 0
    if n < 1:
        raise argparse.ArgumentTypeError("needs a whole number above 0 (got %s)" % text)
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--reps", type=reps_arg, default=5)
    # Several --case globs as vkattn-bench takes them (a case runs if any
    # matches); one flag used to keep only the last (H200 run, 2026-11-27).
    ap.add_argument("--case", action="append", default=[])
    ap.add_argument("--device", help="cuda or cpu (default: cuda where PyTorch has it, else cpu)")
    args = ap.parse_args()
    if torch is None:
        print("bench_torch: needs PyTorch (%s)" % TORCH_MISSING, file=sys.stderr)
        return 1
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    # f16 as vkattn-bench uses; f32 on CPU (CPU f16 matmuls are slow or missing in older torch).
    dtype = torch.float16 if device == "cuda" else torch.float32
    dev_name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print("device: %s, torch %s, %s, %s" % (dev_name, torch.__version__, dtype,
                                            "SDPA" if HAS_SDPA else "no SDPA: explicit attention"))
    results = []
    print("%-22s %10s %9s %8s %-15s %8s" % ("case", "median ms", "GFLOP/s", "GB/s", "backend", "max err"))
    for case in cases():
        if args.case and not any(fnmatch.fnmatch(case[0], g) for g in args.case):
            continue
        print("%s ..." % case[0], file=sys.stderr, flush=True)
        r = run_case(case, device, dtype, args.reps)
        results.append(r)
        print("%-22s %10.3f %9.1f %8.2f %-15s %8.1e%s" % (r["name"], r["median_ms"], r["gflops"], r["gbps"],
                                                         r["backend"], r["max_err"], "" if r["ok"] else "  FAILED"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": {"name": dev_name, "torch": torch.__version__, "dtype": str(dtype)},
                       "backend": "torch " + torch.__version__, "peaks": {}, "cases": results}, f, indent=1)
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
