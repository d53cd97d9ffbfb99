// Step attention over the paged cache: chunked prefill and decode of two
// sequences, compared with plain attention over each sequence's history.
using System;
using System.Collections.Generic;
using System.Linq;
using NUnit.Framework;
using Vkattn;

[TestFixture]
public class VkattnStepTests {
  const int H = 4, Hkv = 2, D = 8, Row = Hkv * D;

  [Test]
  public void ChunkedPrefillAndDecodeMatchReference() {
    var r = new Random(6);
    long[] ids = { 11, 22 };
    int[][] steps = { new[] { 3, 4 }, new[] { 2, 1 }, new[] { 1, 1 } };
    var hk = new List<float>[2, 2];
    var hv = new List<float>[2, 2];
    for (int l = 0; l < 2; ++l)
      for (int s = 0; s < 2; ++s) { hk[l, s] = new List<float>(); hv[l, s] = new List<float>(); }
    var cd = new KvCacheDesc { NumLayers = 2, NumKvHeads = Hkv, HeadDim = D, PageSize = 4, NumPages = 8, Dtype = Dtype.F32 };
    var d = new AttentionDesc { NumHeads = H, NumKvHeads = Hkv, HeadDim = D, Causal = 1 };
    using (var ctx = new Context())
    using (var cache = new KvCache(ctx, cd)) {
      foreach (var counts in steps) {
        int total = counts[0] + counts[1];
        using (var step = cache.Begin(ids, counts)) {
          for (int l = 0; l < 2; ++l) {
            float[] k = Randoms(r, total * Row), v = Randoms(r, total * Row), q = Randoms(r, total * H * D);
            int[] cuQ = new int[3], cuK = new int[3];
            for (int s = 0, off = 0; s < 2; off += counts[s], ++s) {
              hk[l, s].AddRange(k.Skip(off * Row).Take(counts[s] * Row));
              hv[l, s].AddRange(v.Skip(off * Row).Take(counts[s] * Row));
              cuQ[s + 1] = cuQ[s] + counts[s];
              cuK[s + 1] = cuK[s] + hk[l, s].Count / Row;
            }
            var refK = hk[l, 0].Concat(hk[l, 1]).ToArray();
            var refV = hv[l, 0].Concat(hv[l, 1]).ToArray();
            var reference = VkattnTestsReference(q, refK, refV, cuQ, cuK);
            using (var tk = Tensor.Of(ctx, k, total, Hkv, D))
            using (var tv = Tensor.Of(ctx, v, total, Hkv, D))
            using (var tq = Tensor.Of(ctx, q, total, H, D))
            using (var o = new Tensor(ctx, Dtype.F32, total, H, D)) {
              step.Append(l, tk, tv);
              step.Attention(l, d, tq, o);
              var got = o.ToFloatArray();
              Assert.Less(reference.Zip(got, (a, b) => Math.Abs(a - b)).Max(), 1e-5);
            }
          }
          step.Commit();
        }
      }
      Assert.AreEqual(6, cache.Length(11));
      Assert.AreEqual(6, cache.Length(22));
      using (var step = cache.Begin(new long[] { 11 }, new[] { 1 }))
      using (var q = new Tensor(ctx, Dtype.F32, 1, H, D)) {
        var e = Assert.Throws<VkattnException>(() => step.Attention(0, d, q, null));
        StringAssert.StartsWith("vkattn_step_attention: ", e.Message);
        step.Abort();
        e = Assert.Throws<VkattnException>(() => step.Attention(0, d, q, q));
        Assert.AreEqual("vkattn: this Step is already committed or aborted", e.Message);
      }
    }
  }

  static float[] Randoms(Random r, int n) {
    var a = new float[n];
    for (int i = 0; i < n; ++i) a[i] = (float)r.NextDouble() - 0.5f;
    return a;
  }

  // Plain causal (bottom-right) attention with GQA over a packed batch.
  static float[] VkattnTestsReference(float[] q, float[] k, float[] v, int[] cuQ, int[] cuK) {
    var out_ = new float[q.Length];
    for (int b = 0; b + 1 < cuQ.Length; ++b) {
      int t = cuQ[b + 1] - cuQ[b], u = cuK[b + 1] - cuK[b];
      for (int i = 0; i < t; ++i)
        for (int h = 0; h < H; ++h) {
          int kh = h / (H / Hkv), row = (cuQ[b] + i) * H + h, pos = u - t + i;
          var s = new double[pos + 1];
          for (int j = 0; j <= pos; ++j) {
            double dot = 0;
            for (int e = 0; e < D; ++e) dot += (double)q[row * D + e] * k[((cuK[b] + j) * Hkv + kh) * D + e];
            s[j] = dot / Math.Sqrt(D);
          }
          double m = s.Max(), l = s.Sum(x => Math.Exp(x - m));
          for (int e = 0; e < D; ++e) {
            double acc = 0;
            for (int j = 0; j <= pos; ++j) acc += Math.Exp(s[j] - m) * v[((cuK[b] + j) * Hkv + kh) * D + e];
            out_[row * D + e] = (float)(acc / l);
          }
        }
    }
    return out_;
  }
}
