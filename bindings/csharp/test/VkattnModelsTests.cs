// 8-bit caches (codes and scales read back, attention over them) and RoPE
// (queries, and keys rotated at append), checked on the host.
using System;
using NUnit.Framework;
using Vkattn;

[TestFixture]
public class VkattnModelsTests {
  const int H = 4, Hkv = 2, D = 8, Row = Hkv * D;

  // OCP e4m3fn: bias 7, no infinities, 0x7f / 0xff NaN.
  static float E4m3(byte c) {
    int e = (c >> 3) & 15, m = c & 7;
    float sign = (c & 0x80) != 0 ? -1f : 1f;
    if (e == 15 && m == 7) return float.NaN;
    if (e == 0) return sign * m / 8f * (float)Math.Pow(2, -6);
    return sign * (1 + m / 8f) * (float)Math.Pow(2, e - 7);
  }

  // Codes x scales, each within the dtype's rounding of the appended value.
  static float[] Dequantize(Dtype dt, byte[] codes, float[] scales, float[] orig) {
    var out_ = new float[codes.Length];
    for (int i = 0; i < codes.Length; ++i) {
      float s = scales[i / D];
      double want = orig[i], bound;
      if (dt == Dtype.I8) {
        out_[i] = (sbyte)codes[i] * s;
        bound = 0.5 * s;
      } else {
        out_[i] = E4m3(codes[i]) * s;
        want = Math.Max(-448.0 * s, Math.Min(448.0 * s, want));
        bound = Math.Max(Math.Abs(want) / 16, s / 1024.0);
      }
      Assert.LessOrEqual(Math.Abs(out_[i] - want), bound * 1.001 + 1e-7, "element " + i);
    }
    return out_;
  }

  // A one-layer cache of dtype dt (flags: KvCacheFlag bits).
  static KvCacheDesc Q4Desc(Dtype dt = Dtype.Q4, uint flags = 0) {
    return new KvCacheDesc { NumLayers = 1, NumKvHeads = Hkv, HeadDim = D, PageSize = 4, NumPages = 4, Dtype = dt,
                             Flags = flags };
  }

  // k and v (n rows) appended to sequence 3 of a Q4 cache in one step, and
  // what it reads back: codes kb, vb and block scales ks, vs (d 8: one a row).
  static void AppendAndRead(Context ctx, KvCache cache, float[] k, float[] v, int n, out byte[] kb, out byte[] vb,
                            out float[] ks, out float[] vs) {
    using (var tk = Tensor.Of(ctx, k, n, Hkv, D))
    using (var tv = Tensor.Of(ctx, v, n, Hkv, D))
    using (var step = cache.Begin(new long[] { 3 }, new[] { n })) {
      step.Append(0, tk, tv);
      step.Commit();
    }
    kb = new byte[n * Row];
    vb = new byte[n * Row];
    ks = new float[n * Hkv];
    vs = new float[n * Hkv];
    cache.Read(0, 3, 0, n, kb, vb);
    cache.ReadBlockScales(0, 3, 0, n, ks, vs);
  }

  [Test]
  public void Q4CacheStoresCodesAndBlockScales() {
    const int n = 5;
    var r = new Random(4);
    float[] k = VkattnTests.Randoms(r, n * Row), v = VkattnTests.Randoms(r, n * Row);
    using (var ctx = new Context())
    using (var cache = new KvCache(ctx, Q4Desc())) {
      // d 8: one block a row; its largest magnitude codes to -8, every
      // value within a step of what was appended.
      AppendAndRead(ctx, cache, k, v, n, out byte[] kb, out byte[] vb, out float[] ks, out float[] vs);
      Assert.Throws<VkattnException>(() => cache.ReadBlockScales(0, 3, 0, n, new float[1], vs));
      for (int side = 0; side < 2; ++side) {
        float[] x = side == 0 ? k : v, s = side == 0 ? ks : vs;
        byte[] c = side == 0 ? kb : vb;
        for (int row = 0; row < n * Hkv; ++row) {
          float m = 0;
          for (int e = 0; e < D; ++e)
            if (Math.Abs(x[row * D + e]) > Math.Abs(m)) m = x[row * D + e];
          Assert.AreEqual(m / -8, s[row], Math.Abs(m) / 8 * 1e-3, "row " + row);
          for (int e = 0; e < D; ++e) {
            int code = (sbyte)c[row * D + e];
            Assert.That(code >= -8 && code <= 7, "code " + code);
            Assert.LessOrEqual(Math.Abs(code * s[row] - x[row * D + e]), Math.Abs(s[row]) * 1.001 + 1e-7);
          }
        }
      }
    }
  }

  // x (8 elements from off) times the normalized Hadamard matrix of order 8.
  static double[] Hadamard8(float[] x, int off) {
    var y = new double[8];
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j) {
        int odd = 0;
        for (int b = i & j; b != 0; b >>= 1) odd ^= b & 1;
        y[i] += odd == 1 ? -x[off + j] : x[off + j];
      }
      y[i] /= Math.Sqrt(8);
    }
    return y;
  }

  // A Q4 cache with KV_ROTATE_KEYS stores the keys' Hadamard transform
  // (d 8: the whole row); other dtypes refuse the flag.
  [Test]
  public void Q4CacheWithRotatedKeys() {
    const int n = 3;
    var r = new Random(6);
    float[] k = VkattnTests.Randoms(r, n * Row), v = VkattnTests.Randoms(r, n * Row);
    using (var ctx = new Context())
    using (var cache = new KvCache(ctx, Q4Desc(Dtype.Q4, (uint)KvCacheFlag.KV_ROTATE_KEYS))) {
      AppendAndRead(ctx, cache, k, v, n, out byte[] kb, out byte[] vb, out float[] ks, out float[] vs);
      for (int row = 0; row < n * Hkv; ++row) {
        double[] want = Hadamard8(k, row * D);
        for (int e = 0; e < D; ++e)
          Assert.LessOrEqual(Math.Abs((sbyte)kb[row * D + e] * ks[row] - want[e]), Math.Abs(ks[row]) * 1.001 + 1e-6,
                             "row " + row + " elem " + e);
      }
      var bad = Q4Desc(Dtype.F16, (uint)KvCacheFlag.KV_ROTATE_KEYS);
      Assert.Throws<VkattnException>(() => new KvCache(ctx, bad).Dispose());
    }
  }

  [Test]
  public void EightBitCachesDequantizeToWhatAttentionSees() {
    const int n = 5;
    foreach (var dt in new[] { Dtype.I8, Dtype.FP8_E4M3 }) {
      var r = new Random(8);
      var cd = new KvCacheDesc { NumLayers = 1, NumKvHeads = Hkv, HeadDim = D, PageSize = 4, NumPages = 4, Dtype = dt };
      float[] k = VkattnTests.Randoms(r, n * Row), v = VkattnTests.Randoms(r, n * Row);
      float[] q = VkattnTests.Randoms(r, n * H * D);
      for (int i = 0; i < k.Length; ++i) k[i] *= 4;  // up to 2: fp8 at 1/256 saturates
      using (var ctx = new Context())
      using (var cache = new KvCache(ctx, cd))
      using (var tk = Tensor.Of(ctx, k, n, Hkv, D))
      using (var tv = Tensor.Of(ctx, v, n, Hkv, D))
      using (var tq = Tensor.Of(ctx, q, n, H, D))
      using (var o = new Tensor(ctx, Dtype.F32, n, H, D)) {
        using (var step = cache.Begin(new long[] { 3 }, new[] { n })) {
          if (dt == Dtype.FP8_E4M3) {
            var e = Assert.Throws<VkattnException>(() => step.Append(0, tk, tv));
            StringAssert.Contains("no scales", e.Message);
            cache.SetScales(0, new[] { 1f / 256 }, new[] { 1f / 64 });
          } else {
            Assert.Throws<VkattnException>(() => cache.SetScales(0, new[] { 1f }, new[] { 1f }));
          }
          step.Append(0, tk, tv);
          Assert.Throws<VkattnException>(() => cache.SetScales(0, new[] { 1f }, new[] { 1f }));
          step.Attention(0, VkattnTests.Desc(true, -1), tq, o);
          step.Commit();
        }
        byte[] kb = new byte[n * Row], vb = new byte[n * Row];
        float[] ks = new float[n * Hkv], vs = new float[n * Hkv];
        cache.Read(0, 3, 0, n, kb, vb);
        cache.ReadScales(0, 3, 0, n, ks, vs);
        Assert.Throws<VkattnException>(() => cache.ReadScales(0, 3, 0, n, new float[1], vs));
        if (dt == Dtype.FP8_E4M3) {
          Assert.AreEqual(1f / 256, ks[0]);
          Assert.AreEqual(1f / 64, vs[n * Hkv - 1]);
        }
        var dk = Dequantize(dt, kb, ks, k);
        var dv = Dequantize(dt, vb, vs, v);
        var reference = VkattnTests.Reference(q, dk, dv, new[] { 0, n }, new[] { 0, n }, H, Hkv, D, true, -1);
        Assert.Less(VkattnTests.MaxDiff(reference[0], o.ToFloatArray()), 1e-4, dt.ToString());
      }
    }
  }

  // Host RoPE without scaling: pairs of dims [off, off + rot).
  static float[] Rotate(float[] x, int heads, int[] pos, bool gptj, int rot, int off) {
    var out_ = (float[])x.Clone();
    for (int t = 0; t < pos.Length; ++t)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < rot / 2; ++i) {
          int b = (t * heads + h) * D;
          double a = pos[t] * Math.Pow(10000, -2.0 * i / rot);
          int i1 = gptj ? off + 2 * i : off + i, i2 = gptj ? off + 2 * i + 1 : off + i + rot / 2;
          double x1 = x[b + i1], x2 = x[b + i2];
          out_[b + i1] = (float)(x1 * Math.Cos(a) - x2 * Math.Sin(a));
          out_[b + i2] = (float)(x2 * Math.Cos(a) + x1 * Math.Sin(a));
        }
    return out_;
  }

  [Test]
  public void RopeRotatesQueriesAndAppendedKeys() {
    var r = new Random(9);
    var q = VkattnTests.Randoms(r, 5 * H * D);
    using (var ctx = new Context())
    using (var tq = Tensor.Of(ctx, q, 5, H, D))
    using (var o = new Tensor(ctx, Dtype.F32, 5, H, D)) {
      var gptj = new RopeDesc { Layout = (uint)RopeLayout.ROPE_GPTJ, RotaryDim = 4, RotaryOffset = 2 };
      ctx.Rope(gptj, new[] { 0, 2, 5 }, new[] { 7, 0 }, tq, o);
      var want = Rotate(q, H, new[] { 7, 8, 0, 1, 2 }, true, 4, 2);
      Assert.Less(VkattnTests.MaxDiff(want, o.ToFloatArray()), 1e-5);
      gptj.RotaryDim = 3;
      var e = Assert.Throws<VkattnException>(() => ctx.Rope(gptj, new[] { 0, 5 }, new[] { 0 }, tq, tq));
      StringAssert.StartsWith("vkattn_rope: ", e.Message);

      var cd = new KvCacheDesc { NumLayers = 1, NumKvHeads = Hkv, HeadDim = D, PageSize = 4, NumPages = 4, Dtype = Dtype.F32 };
      var keys = new float[5 * Row];
      using (var cache = new KvCache(ctx, cd)) {
        var neox = new RopeDesc();
        foreach (var span in new[] { new[] { 0, 3 }, new[] { 3, 5 } }) {
          int n = span[1] - span[0];
          float[] k = VkattnTests.Randoms(r, n * Row), v = VkattnTests.Randoms(r, n * Row);
          Array.Copy(k, 0, keys, span[0] * Row, n * Row);
          using (var step = cache.Begin(new long[] { 4 }, new[] { n }))
          using (var tk = Tensor.Of(ctx, k, n, Hkv, D))
          using (var tv = Tensor.Of(ctx, v, n, Hkv, D)) {
            step.AppendRope(0, neox, tk, tv);
            step.Commit();
          }
        }
        float[] gk = new float[5 * Row], gv = new float[5 * Row];
        cache.Read(0, 4, 0, 5, gk, gv);
        var wantK = Rotate(keys, Hkv, new[] { 0, 1, 2, 3, 4 }, false, D, 0);
        Assert.Less(VkattnTests.MaxDiff(wantK, gk), 1e-5);
      }
    }
  }
}
