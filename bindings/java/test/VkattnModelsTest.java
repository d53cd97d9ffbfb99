import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.Random;
import org.junit.Test;
import org.vkattn.AttentionDesc;
import org.vkattn.Context;
import org.vkattn.Dtype;
import org.vkattn.KvCache;
import org.vkattn.KvCacheDesc;
import org.vkattn.KvCacheFlag;
import org.vkattn.RopeDesc;
import org.vkattn.RopeLayout;
import org.vkattn.Step;
import org.vkattn.Tensor;
import org.vkattn.VkattnException;

/** 8-bit caches (codes and scales read back, attention over them) and RoPE
 * (queries, and keys rotated at append), checked on the host. */
public class VkattnModelsTest {
  static final int H = VkattnTest.H, HKV = VkattnTest.HKV, D = VkattnTest.D, ROW = HKV * D;

  /** OCP e4m3fn: bias 7, no infinities, 0x7f / 0xff NaN. */
  static float e4m3(byte c) {
    int e = (c >> 3) & 15, m = c & 7;
    float sign = c < 0 ? -1f : 1f;
    if (e == 15 && m == 7) return Float.NaN;
    if (e == 0) return sign * m / 8f * (float) Math.pow(2, -6);
    return sign * (1 + m / 8f) * (float) Math.pow(2, e - 7);
  }

  /** Codes x scales, each within the dtype's rounding of the appended value. */
  static float[] dequantize(Dtype dt, byte[] codes, float[] scales, float[] orig) {
    float[] out = new float[codes.length];
    for (int i = 0; i < codes.length; ++i) {
      float s = scales[i / D];
      double want = orig[i], bound;
      if (dt == Dtype.I8) {
        out[i] = codes[i] * s;
        bound = 0.5 * s;
      } else {
        out[i] = e4m3(codes[i]) * s;
        want = Math.max(-448.0 * s, Math.min(448.0 * s, want));
        bound = Math.max(Math.abs(want) / 16, s / 1024.0);
      }
      assertTrue("element " + i + ": " + orig[i] + " -> " + out[i],
          Math.abs(out[i] - want) <= bound * 1.001 + 1e-7);
    }
    return out;
  }

  @Test
  public void eightBitCachesDequantizeToWhatAttentionSees() {
    final int n = 5;
    for (Dtype dt : new Dtype[] {Dtype.I8, Dtype.FP8_E4M3}) {
      Random r = new Random(8);
      KvCacheDesc cd = VkattnStepTest.cacheDesc();
      cd.setNumLayers(1);
      cd.setDtype(dt);
      float[] k = VkattnTest.random(r, n * ROW), v = VkattnTest.random(r, n * ROW);
      float[] q = VkattnTest.random(r, n * H * D);
      for (int i = 0; i < k.length; ++i) k[i] *= 4; // up to 2: fp8 at 1/256 saturates
      try (Context ctx = new Context(); KvCache cache = new KvCache(ctx, cd);
          Tensor tk = Tensor.of(ctx, k, n, HKV, D); Tensor tv = Tensor.of(ctx, v, n, HKV, D);
          Tensor tq = Tensor.of(ctx, q, n, H, D);
          Tensor out = new Tensor(ctx, Dtype.F32, n, H, D)) {
        try (Step step = cache.begin(new long[] {3}, new int[] {n})) {
          if (dt == Dtype.FP8_E4M3) {
            VkattnException e =
                assertThrows(VkattnException.class, () -> step.append(0, tk, tv));
            assertTrue(e.getMessage(), e.getMessage().contains("no scales"));
            cache.setScales(0, new float[] {1f / 256}, new float[] {1f / 64});
          } else {
            assertThrows(VkattnException.class,
                () -> cache.setScales(0, new float[] {1f}, new float[] {1f}));
          }
          step.append(0, tk, tv);
          assertThrows(VkattnException.class,
              () -> cache.setScales(0, new float[] {1f}, new float[] {1f}));
          AttentionDesc d = VkattnTest.desc(true, -1);
          step.attention(0, d, tq, out);
          step.commit();
        }
        byte[] kb = new byte[n * ROW], vb = new byte[n * ROW];
        float[] ks = new float[n * HKV], vs = new float[n * HKV];
        cache.read(0, 3, 0, n, kb, vb);
        cache.readScales(0, 3, 0, n, ks, vs);
        assertThrows(VkattnException.class, () -> cache.readScales(0, 3, 0, n, new float[1], vs));
        if (dt == Dtype.FP8_E4M3) {
          assertEquals(1f / 256, ks[0], 0f);
          assertEquals(1f / 64, vs[n * HKV - 1], 0f);
        }
        float[] dk = dequantize(dt, kb, ks, k), dv = dequantize(dt, vb, vs, v);
        float[][] ref =
            VkattnTest.reference(q, dk, dv, new int[] {0, n}, new int[] {0, n}, H, HKV, D, D, true, -1);
        float diff = VkattnTest.maxDiff(ref[0], out.toFloatArray());
        assertTrue(dt + ": " + diff, diff < 1e-4f);
      }
    }
  }

  /** A one-layer Q4 cache's descriptor, keys rotated or not. */
  static KvCacheDesc q4Desc(boolean rotateKeys) {
    KvCacheDesc cd = VkattnStepTest.cacheDesc();
    cd.setNumLayers(1);
    cd.setDtype(Dtype.Q4);
    if (rotateKeys) cd.setFlags(KvCacheFlag.KV_ROTATE_KEYS.swigValue());
    return cd;
  }

  /** What a Q4 cache reads back: codes, and block scales (d 8: one a row). */
  static final class Q4Rows {
    byte[] kb, vb;
    float[] ks, vs;
  }

  /** k and v (n rows) appended to sequence 3 of cache in one step, read back. */
  static Q4Rows appendAndRead(Context ctx, KvCache cache, float[] k, float[] v, int n) {
    try (Tensor tk = Tensor.of(ctx, k, n, HKV, D); Tensor tv = Tensor.of(ctx, v, n, HKV, D);
        Step step = cache.begin(new long[] {3}, new int[] {n})) {
      step.append(0, tk, tv);
      step.commit();
    }
    Q4Rows q = new Q4Rows();
    q.kb = new byte[n * ROW];
    q.vb = new byte[n * ROW];
    q.ks = new float[n * HKV];
    q.vs = new float[n * HKV];
    cache.read(0, 3, 0, n, q.kb, q.vb);
    cache.readBlockScales(0, 3, 0, n, q.ks, q.vs);
    return q;
  }

  @Test
  public void q4CacheStoresCodesAndBlockScales() {
    final int n = 5;
    Random r = new Random(4);
    float[] k = VkattnTest.random(r, n * ROW), v = VkattnTest.random(r, n * ROW);
    try (Context ctx = new Context(); KvCache cache = new KvCache(ctx, q4Desc(false))) {
      // d 8: one block a row; its largest magnitude codes to -8, every
      // value within a step of what was appended.
      Q4Rows q = appendAndRead(ctx, cache, k, v, n);
      assertThrows(VkattnException.class, () -> cache.readBlockScales(0, 3, 0, n, new float[1], q.vs));
      for (int side = 0; side < 2; ++side) {
        float[] x = side == 0 ? k : v, s = side == 0 ? q.ks : q.vs;
        byte[] c = side == 0 ? q.kb : q.vb;
        for (int row = 0; row < n * HKV; ++row) {
          float m = 0;
          for (int e = 0; e < D; ++e)
            if (Math.abs(x[row * D + e]) > Math.abs(m)) m = x[row * D + e];
          assertEquals(m / -8, s[row], Math.abs(m) / 8 * 1e-3);
          for (int e = 0; e < D; ++e) {
            int code = c[row * D + e];
            assertTrue("code " + code, code >= -8 && code <= 7);
            assertTrue(Math.abs(code * s[row] - x[row * D + e]) <= Math.abs(s[row]) * 1.001 + 1e-7);
          }
        }
      }
    }
  }

  /** x (8 elements from off) times the normalized Hadamard matrix of order 8. */
  static double[] hadamard8(float[] x, int off) {
    double[] y = new double[8];
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j) y[i] += Integer.bitCount(i & j) % 2 == 1 ? -x[off + j] : x[off + j];
      y[i] /= Math.sqrt(8);
    }
    return y;
  }

  /** A Q4 cache with KV_ROTATE_KEYS stores the keys' Hadamard transform (d 8: the whole row). */
  @Test
  public void q4CacheWithRotatedKeys() {
    final int n = 3;
    Random r = new Random(6);
    float[] k = VkattnTest.random(r, n * ROW), v = VkattnTest.random(r, n * ROW);
    try (Context ctx = new Context(); KvCache cache = new KvCache(ctx, q4Desc(true))) {
      Q4Rows q = appendAndRead(ctx, cache, k, v, n);
      for (int row = 0; row < n * HKV; ++row) {
        double[] want = hadamard8(k, row * D);
        for (int e = 0; e < D; ++e)
          assertTrue("row " + row + " elem " + e,
              Math.abs(q.kb[row * D + e] * q.ks[row] - want[e]) <= Math.abs(q.ks[row]) * 1.001 + 1e-6);
      }
      KvCacheDesc bad = VkattnStepTest.cacheDesc();
      bad.setDtype(Dtype.F16);
      bad.setFlags(KvCacheFlag.KV_ROTATE_KEYS.swigValue());
      assertThrows(VkattnException.class, () -> new KvCache(ctx, bad).close());
    }
  }

  /** Host RoPE without scaling: pairs of dims [off, off + rot). */
  static float[] rotate(float[] x, int heads, int[] pos, boolean gptj, int rot, int off) {
    float[] out = x.clone();
    for (int t = 0; t < pos.length; ++t)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < rot / 2; ++i) {
          int base = (t * heads + h) * D;
          double a = pos[t] * Math.pow(10000, -2.0 * i / rot);
          int i1 = gptj ? off + 2 * i : off + i, i2 = gptj ? off + 2 * i + 1 : off + i + rot / 2;
          double x1 = x[base + i1], x2 = x[base + i2];
          out[base + i1] = (float) (x1 * Math.cos(a) - x2 * Math.sin(a));
          out[base + i2] = (float) (x2 * Math.cos(a) + x1 * Math.sin(a));
        }
    return out;
  }

  @Test
  public void ropeRotatesQueriesAndAppendedKeys() {
    Random r = new Random(9);
    float[] q = VkattnTest.random(r, 5 * H * D);
    try (Context ctx = new Context(); Tensor tq = Tensor.of(ctx, q, 5, H, D);
        Tensor out = new Tensor(ctx, Dtype.F32, 5, H, D)) {
      RopeDesc gptj = new RopeDesc();
      gptj.setLayout(RopeLayout.ROPE_GPTJ.swigValue());
      gptj.setRotaryDim(4);
      gptj.setRotaryOffset(2);
      ctx.rope(gptj, new int[] {0, 2, 5}, new int[] {7, 0}, tq, out);
      float[] want = rotate(q, H, new int[] {7, 8, 0, 1, 2}, true, 4, 2);
      assertTrue(VkattnTest.maxDiff(want, out.toFloatArray()) < 1e-5f);
      gptj.setRotaryDim(3);
      VkattnException e = assertThrows(VkattnException.class,
          () -> ctx.rope(gptj, new int[] {0, 5}, new int[] {0}, tq, tq));
      assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_rope: "));

      KvCacheDesc cd = VkattnStepTest.cacheDesc();
      cd.setNumLayers(1);
      float[] keys = new float[5 * ROW];
      try (KvCache cache = new KvCache(ctx, cd)) {
        RopeDesc neox = new RopeDesc();
        for (int[] span : new int[][] {{0, 3}, {3, 5}}) {
          int n = span[1] - span[0];
          float[] k = VkattnTest.random(r, n * ROW), v = VkattnTest.random(r, n * ROW);
          System.arraycopy(k, 0, keys, span[0] * ROW, n * ROW);
          try (Step step = cache.begin(new long[] {4}, new int[] {n});
              Tensor tk = Tensor.of(ctx, k, n, HKV, D); Tensor tv = Tensor.of(ctx, v, n, HKV, D)) {
            step.appendRope(0, neox, tk, tv);
            step.commit();
          }
        }
        float[] gk = new float[5 * ROW], gv = new float[5 * ROW];
        cache.read(0, 4, 0, 5, gk, gv);
        float[] wantK = rotate(keys, HKV, new int[] {0, 1, 2, 3, 4}, false, D, 0);
        assertTrue(VkattnTest.maxDiff(wantK, gk) < 1e-5f);
      }
    }
  }
}
