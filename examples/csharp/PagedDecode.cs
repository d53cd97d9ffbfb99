// The same small program in Java, C# and Go: a context, a paged KV cache,
// a 40-token prompt prefilled in two chunks, 4 decoded tokens, then the
// norm of the last output and the device name. Inputs come from one LCG,
// so the three programs print the same numbers.
//
//   bash tools/run-binding-example.sh csharp
using System;
using Vkattn;

static class PagedDecode {
  const int Layers = 2, H = 4, Hkv = 2, D = 16;
  static ulong state = 1;

  static float[] Next(int n) {
    var a = new float[n];
    for (int i = 0; i < n; ++i) {
      state = unchecked(state * 6364136223846793005UL + 1442695040888963407UL);
      a[i] = (state >> 40) / 16777216f - 0.5f;
    }
    return a;
  }

  // One step of `tokens` new tokens of sequence 1 through every layer;
  // returns the last layer's output.
  static float[] Step(Context ctx, KvCache cache, AttentionDesc desc, int tokens) {
    float[] out_ = null;
    using (var step = cache.Begin(new long[] { 1 }, new[] { tokens })) {
      for (int layer = 0; layer < Layers; ++layer)
        using (var k = Tensor.Of(ctx, Next(tokens * Hkv * D), tokens, Hkv, D))
        using (var v = Tensor.Of(ctx, Next(tokens * Hkv * D), tokens, Hkv, D))
        using (var q = Tensor.Of(ctx, Next(tokens * H * D), tokens, H, D))
        using (var o = new Tensor(ctx, Dtype.F32, tokens, H, D)) {
          step.Append(layer, k, v);
          step.Attention(layer, desc, q, o);
          out_ = o.ToFloatArray();
        }
      step.Commit();
    }
    return out_;
  }

  static int Main() {
    using (var ctx = new Context()) {
      // f16 pages of 16 tokens by default.
      var cd = new KvCacheDesc { NumLayers = Layers, NumKvHeads = Hkv, HeadDim = D, NumPages = 8 };
      var desc = new AttentionDesc { NumHeads = H, NumKvHeads = Hkv, HeadDim = D, Causal = 1 };
      using (var cache = new KvCache(ctx, cd)) {
        Step(ctx, cache, desc, 24); // prompt, first chunk
        Step(ctx, cache, desc, 16); // prompt, second chunk
        float[] out_ = null;
        for (int i = 0; i < 4; ++i) out_ = Step(ctx, cache, desc, 1); // decode
        double norm = 0;
        foreach (float x in out_) norm += (double)x * x;
        Console.WriteLine("device: {0}", ctx.DeviceInfo().Name);
        Console.WriteLine("sequence 1: {0} tokens in the cache, {1} free pages", cache.Length(1), cache.NumFreePages());
        Console.WriteLine("last output norm: {0:F6}", Math.Sqrt(norm));
        return norm > 0 && !double.IsInfinity(norm) ? 0 : 1;
      }
    }
  }
}
