"""The same small program in Java, C#, Go and Python: a context, a paged KV
cache, a 40-token prompt prefilled in two chunks, 4 decoded tokens, then the
norm of the last output and the device name. Inputs come from one LCG, so
the four programs print the same numbers.

    bash tools/run-binding-example.sh python
"""
import math

import numpy as np

import vkattn

LAYERS, HEADS, KV_HEADS, HEAD_DIM = 2, 4, 2, 16
_state = 1


def next_values(n):
    """n values in [-0.5, 0.5) from the shared 64-bit LCG, as float32."""
    global _state
    a = np.empty(n, np.float32)
    for i in range(n):
        _state = (_state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        a[i] = np.float32(_state >> 40) / np.float32(16777216) - np.float32(0.5)
    return a


def step(ctx, cache, tokens):
    """Runs `tokens` new tokens of sequence 1 through every layer; returns
    the last layer's output."""
    out = None
    with cache.begin([1], [tokens]) as s:
        for layer in range(LAYERS):
            k = next_values(tokens * KV_HEADS * HEAD_DIM).reshape(tokens, KV_HEADS, HEAD_DIM)
            v = next_values(tokens * KV_HEADS * HEAD_DIM).reshape(tokens, KV_HEADS, HEAD_DIM)
            q = next_values(tokens * HEADS * HEAD_DIM).reshape(tokens, HEADS, HEAD_DIM)
            s.append(layer, k, v)
            with s.attention(layer, q, causal=True) as o:
                out = o.numpy()
        s.commit()
    return out


def main():
    with vkattn.Context() as ctx:
        # f16 pages of 16 tokens by default
        with ctx.kv_cache(LAYERS, KV_HEADS, HEAD_DIM, num_pages=8) as cache:
            out = None
            for tokens in (24, 16, 1, 1, 1, 1):  # prompt in two chunks, then 4 decodes
                out = step(ctx, cache, tokens)
            norm = math.sqrt(float(np.sum(out.astype(np.float64) ** 2)))
            print("device: %s" % ctx.device_info["name"])
            print("sequence 1: %d tokens in the cache, %d free pages"
                  % (cache.length(1), cache.num_free_pages))
            print("last output norm: %.6f" % norm)
            if not (norm > 0) or math.isinf(norm):
                raise SystemExit("bad norm %g" % norm)


if __name__ == "__main__":
    main()
