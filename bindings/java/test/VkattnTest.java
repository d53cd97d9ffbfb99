import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import org.junit.AfterClass;
import org.junit.BeforeClass;
import org.junit.Test;
import org.vkattn.AttentionDesc;
import org.vkattn.Context;
import org.vkattn.DeviceInfo;
import org.vkattn.Dtype;
import org.vkattn.KvCache;
import org.vkattn.KvCacheDesc;
import org.vkattn.MaskType;
import org.vkattn.RopeDesc;
import org.vkattn.Step;
import org.vkattn.Status;
import org.vkattn.Tensor;
import org.vkattn.Variant;
import org.vkattn.Vkattn;
import org.vkattn.VkattnException;

/** The Java binding on the default device (lavapipe in CI), tiny shapes. */
public class VkattnTest {
  static final int H = 4, HKV = 2, D = 8;
  static Context ctx;

  @BeforeClass
  public static void open() {
    ctx = new Context();
  }

  @AfterClass
  public static void close() {
    ctx.close();
  }

  // ---- plain reference attention (bottom-right causal, window, GQA) ----

  /** An attention variant's mask function, on the host. */
  interface KeyMask {
    boolean sees(int seq, int head, int qPos, int kPos);
  }

  /** An attention variant's score function, on the host. */
  interface ScoreMod {
    double apply(double score, int seq, int head, int qPos, int kPos);
  }

  /** Returns {out [tq*H*dv], lse [tq*H]} for a packed batch. */
  static float[][] reference(float[] q, float[] k, float[] v, int[] cuQ, int[] cuK, int h,
      int hkv, int d, int dv, boolean causal, int window) {
    return reference(q, k, v, cuQ, cuK, h, hkv, d, dv, causal, window, null, null);
  }

  /** The same with a variant's functions (null: none). */
  static float[][] reference(float[] q, float[] k, float[] v, int[] cuQ, int[] cuK, int h,
      int hkv, int d, int dv, boolean causal, int window, KeyMask mask, ScoreMod score) {
    int tq = cuQ[cuQ.length - 1];
    float[] out = new float[tq * h * dv];
    float[] lse = new float[tq * h];
    double scale = 1.0 / Math.sqrt(d);
    for (int b = 0; b + 1 < cuQ.length; ++b) {
      int t = cuQ[b + 1] - cuQ[b], u = cuK[b + 1] - cuK[b];
      for (int i = 0; i < t; ++i) {
        int pos = u - t + i;
        for (int hh = 0; hh < h; ++hh) {
          int kh = hh / (h / hkv);
          int row = (cuQ[b] + i) * h + hh;
          double[] s = new double[u];
          double m = Double.NEGATIVE_INFINITY;
          for (int j = 0; j < u; ++j) {
            boolean visible = (!causal || j <= pos) && (window < 0 || pos - j <= window)
                && (mask == null || mask.sees(b, hh, pos, j));
            if (!visible) {
              s[j] = Double.NEGATIVE_INFINITY;
              continue;
            }
            double dot = 0;
            for (int e = 0; e < d; ++e) dot += q[row * d + e] * k[((cuK[b] + j) * hkv + kh) * d + e];
            s[j] = score == null ? dot * scale : score.apply(dot * scale, b, hh, pos, j);
            m = Math.max(m, s[j]);
          }
          double l = 0;
          double[] acc = new double[dv];
          for (int j = 0; j < u; ++j) {
            if (s[j] == Double.NEGATIVE_INFINITY) continue;
            double p = Math.exp(s[j] - m);
            l += p;
            for (int e = 0; e < dv; ++e) acc[e] += p * v[((cuK[b] + j) * hkv + kh) * dv + e];
          }
          for (int e = 0; e < dv; ++e) out[row * dv + e] = l > 0 ? (float) (acc[e] / l) : 0f;
          lse[row] = l > 0 ? (float) (m + Math.log(l)) : Float.NEGATIVE_INFINITY;
        }
      }
    }
    return new float[][] {out, lse};
  }

  static float[] random(Random r, int n) {
    float[] a = new float[n];
    for (int i = 0; i < n; ++i) a[i] = r.nextFloat() - 0.5f;
    return a;
  }

  static float maxDiff(float[] a, float[] b) {
    assertEquals(a.length, b.length);
    float m = 0;
    for (int i = 0; i < a.length; ++i) m = Math.max(m, Math.abs(a[i] - b[i]));
    return m;
  }

  static AttentionDesc desc(boolean causal, int window) {
    AttentionDesc d = new AttentionDesc();
    d.setNumHeads(H);
    d.setNumKvHeads(HKV);
    d.setHeadDim(D);
    d.setCausal(causal ? 1 : 0);
    d.setWindowLeft(window);
    return d;
  }

  // f16 bits for values that f16 holds exactly (multiples of 1/1024 below 1).
  static short toHalf(float f) {
    int bits = Float.floatToIntBits(f);
    int sign = (bits >>> 16) & 0x8000;
    if ((bits & 0x7fffffff) == 0) return (short) sign;
    int exp = ((bits >>> 23) & 0xff) - 127 + 15;
    return (short) (sign | (exp << 10) | ((bits >>> 13) & 0x3ff));
  }

  static float fromHalf(short s) {
    int h = s & 0xffff;
    int sign = (h & 0x8000) << 16;
    int exp = (h >>> 10) & 0x1f;
    int man = h & 0x3ff;
    if (exp == 0) return Float.intBitsToFloat(sign) + (sign != 0 ? -1 : 1) * man / 16777216f;
    return Float.intBitsToFloat(sign | ((exp - 15 + 127) << 23) | (man << 13));
  }

  // ---- results ----

  @Test
  public void varlenCausalWindowMatchesReference() {
    Random r = new Random(1);
    int[] cuQ = {0, 3, 5, 6}, cuK = {0, 7, 9, 13}; // (t, u) = (3,7), (2,2), (1,4)
    int tq = 6, tk = 13, window = 2;
    float[] q = random(r, tq * H * D), k = random(r, tk * HKV * D), v = random(r, tk * HKV * D);
    float[][] ref = reference(q, k, v, cuQ, cuK, H, HKV, D, D, true, window);
    try (Tensor tQ = Tensor.of(ctx, q, tq, H, D);
        Tensor tK = Tensor.of(ctx, k, tk, HKV, D);
        Tensor tV = Tensor.of(ctx, v, tk, HKV, D);
        Tensor tO = new Tensor(ctx, Dtype.F32, tq, H, D);
        Tensor tL = new Tensor(ctx, Dtype.F32, tq, H)) {
      AttentionDesc d = desc(true, window);
      d.setLse(tL);
      ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      assertTrue("out", maxDiff(ref[0], tO.toFloatArray()) < 1e-5f);
      assertTrue("lse", maxDiff(ref[1], tL.toFloatArray()) < 1e-5f);
    }
  }

  // Attention variants (user functions): documents packed in one sequence
  // (an I32 id per position, slot 0) and a per-head slope on the distance
  // (F32, slot 1), against the reference given the same functions.
  @Test
  public void variantDocumentMaskAndScoreFunctionMatchTheReference() {
    Random r = new Random(7);
    int[] cuQ = {0, 12, 15}, cuK = {0, 12, 20}; // (t, u) = (12, 12): three documents; (3, 8)
    int tq = 15, tk = 20;
    final int[] doc = {0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2};
    final float[] slopes = {0.1f, -0.2f, 0.3f, 0.05f};
    String source = "bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {\n"
        + "  return vkattn_param_i32(0, uint(q_pos)) == vkattn_param_i32(0, uint(k_pos));\n"
        + "}\n"
        + "float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {\n"
        + "  return score + vkattn_param_f32(1, head) * float(k_pos - q_pos);\n"
        + "}\n";
    float[] q = random(r, tq * H * D), k = random(r, tk * HKV * D), v = random(r, tk * HKV * D);
    float[][] ref = reference(q, k, v, cuQ, cuK, H, HKV, D, D, true, -1,
        (b, h, qp, kp) -> doc[qp] == doc[kp],
        (sc, b, h, qp, kp) -> sc + (double) slopes[h] * (float) (kp - qp));
    Variant var = new Variant(ctx, source, Dtype.I32, Dtype.F32);
    try (Tensor tDoc = new Tensor(ctx, Dtype.I32, doc.length);
        Tensor tSlopes = Tensor.of(ctx, slopes, H);
        Tensor tQ = Tensor.of(ctx, q, tq, H, D);
        Tensor tK = Tensor.of(ctx, k, tk, HKV, D);
        Tensor tV = Tensor.of(ctx, v, tk, HKV, D);
        Tensor tO = new Tensor(ctx, Dtype.F32, tq, H, D);
        Tensor tL = new Tensor(ctx, Dtype.F32, tq, H)) {
      tDoc.write(doc);
      AttentionDesc d = desc(true, -1);
      d.setLse(tL);
      d.setVariant(var);
      d.setVariantParam(0, tDoc);
      d.setVariantParam(1, tSlopes);
      ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      assertTrue("out", maxDiff(ref[0], tO.toFloatArray()) < 1e-5f);
      assertTrue("lse", maxDiff(ref[1], tL.toFloatArray()) < 1e-5f);
      // A declared slot left empty, then a closed variant: refused.
      d.setVariantParam(1, null);
      VkattnException e = assertThrows(
          VkattnException.class, () -> ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO));
      assertEquals(Status.ERROR_INVALID_ARGUMENT, e.status());
      d.setVariantParam(1, tSlopes);
      var.close();
      assertFalse(var.isOpen());
      assertThrows(VkattnException.class, () -> ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO));
    } finally {
      var.close();  // (idempotent)
    }
    // A source that does not compile: the compiler's line.
    VkattnException e = assertThrows(VkattnException.class,
        () -> new Variant(ctx, "bool vkattn_mask_mod(uint seq, uint head, int q, int k) {\n  return x;\n}\n"));
    assertTrue(e.getMessage(), e.getMessage().contains("line 2"));
  }

  // windowRight 0 without causal is causal; chunkSize 1 leaves each query
  // its own key, as windowLeft 0 does.
  @Test
  public void rightWindowAndChunksMatchTheirEquivalents() {
    Random r = new Random(3);
    int[] cuQ = {0, 3, 5, 6}, cuK = {0, 7, 9, 13};
    int tq = 6, tk = 13, window = 2;
    float[] q = random(r, tq * H * D), k = random(r, tk * HKV * D), v = random(r, tk * HKV * D);
    try (Tensor tQ = Tensor.of(ctx, q, tq, H, D);
        Tensor tK = Tensor.of(ctx, k, tk, HKV, D);
        Tensor tV = Tensor.of(ctx, v, tk, HKV, D);
        Tensor tO = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      AttentionDesc d = desc(false, window);
      d.setWindowRight(0);
      ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      float[][] ref = reference(q, k, v, cuQ, cuK, H, HKV, D, D, true, window);
      assertTrue("window right 0", maxDiff(ref[0], tO.toFloatArray()) < 1e-5f);
      d = desc(true, -1);
      d.setChunkSize(1);
      ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      ref = reference(q, k, v, cuQ, cuK, H, HKV, D, D, true, 0);
      assertTrue("chunk 1", maxDiff(ref[0], tO.toFloatArray()) < 1e-5f);
    }
  }

  // A bidirectional span over each whole sequence makes causal attention
  // see every key: it equals attention without causal. A span_indptr that
  // does not fit the batch raises.
  @Test
  public void spansOverWholeSequencesUndoCausal() {
    Random r = new Random(4);
    int[] cuQ = {0, 3, 5, 6}, cuK = {0, 7, 9, 13};
    int tq = 6, tk = 13;
    float[] q = random(r, tq * H * D), k = random(r, tk * HKV * D), v = random(r, tk * HKV * D);
    try (Tensor tQ = Tensor.of(ctx, q, tq, H, D);
        Tensor tK = Tensor.of(ctx, k, tk, HKV, D);
        Tensor tV = Tensor.of(ctx, v, tk, HKV, D);
        Tensor tO = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      AttentionDesc d = desc(true, -1);
      d.setSpans(new int[] {0, 1, 2, 3}, new int[] {0, 7, 0, 2, 0, 4});
      ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      float[][] ref = reference(q, k, v, cuQ, cuK, H, HKV, D, D, false, -1);
      assertTrue("spans", maxDiff(ref[0], tO.toFloatArray()) < 1e-5f);
      d.setSpans(new int[] {0, 1}, new int[] {0, 7});
      final AttentionDesc shortIndptr = d;
      VkattnException e =
          assertThrows(
              VkattnException.class,
              () -> ctx.attentionVarlen(shortIndptr, cuQ, cuK, tQ, tK, tV, tO));
      assertTrue(e.getMessage(), e.getMessage().contains("span_indptr has 2 entries"));
    }
  }

  /** A draft tree of n tokens, node i's parent drawn from [0, i): row i of
   * the [n][n] matrix is its parent's row plus i itself. */
  static boolean[][] randomTree(Random r, int n) {
    boolean[][] m = new boolean[n][];
    for (int i = 0; i < n; ++i) {
      m[i] = i > 0 ? m[r.nextInt(i)].clone() : new boolean[n];
      m[i][i] = true;
    }
    return m;
  }

  /** The bool mask equal to the trees (1 where the key is before the
   * queries' own block or the tree bit is set; all 1 without a tree): each
   * sequence's t x u block row-major, in batch order. */
  static byte[] treeBoolMask(boolean[][][] trees, int[] cuQ, int[] cuK) {
    int n = 0;
    for (int b = 0; b < trees.length; ++b) n += (cuQ[b + 1] - cuQ[b]) * (cuK[b + 1] - cuK[b]);
    byte[] mask = new byte[n];
    int at = 0;
    for (int b = 0; b < trees.length; ++b) {
      int t = cuQ[b + 1] - cuQ[b], u = cuK[b + 1] - cuK[b];
      for (int i = 0; i < t; ++i)
        for (int j = 0; j < u; ++j, ++at)
          mask[at] = (byte) (trees[b] == null || j < u - t || trees[b][i][j - (u - t)] ? 1 : 0);
    }
    return mask;
  }

  @Test
  public void packTreesPacksBitsLowFirst() {
    boolean[][] m = new boolean[33][33];
    for (int i = 0; i < 33; ++i) m[i][i] = true;
    m[32][0] = true;
    int[][] p = AttentionDesc.packTrees(new boolean[][][] {null, {{true, true}, {true, true}}, m});
    assertArrayEquals(new int[] {0, 0, 2, 68}, p[0]);
    assertEquals(3, p[1][0]);
    assertEquals(3, p[1][1]);
    assertEquals(1, p[1][2]);
    assertEquals(1 << 31, p[1][2 + 31 * 2]);
    assertEquals(1, p[1][2 + 32 * 2]);
    assertEquals(1, p[1][2 + 32 * 2 + 1]);
    VkattnException e =
        assertThrows(
            VkattnException.class,
            () -> AttentionDesc.packTrees(new boolean[][][] {{{true, true}}}));
    assertTrue(e.getMessage(), e.getMessage().contains("row 0 has 2 entries, want 1"));
  }

  // A varlen call with a draft tree on one sequence (9 tokens over 40 keys)
  // and none on the other equals the same call with the equivalent bool
  // mask. Tree arrays shorter than the call needs throw.
  @Test
  public void speculativeTreesEqualTheirBoolMask() {
    Random r = new Random(14);
    int[] cuQ = {0, 9, 14}, cuK = {0, 40, 52};
    int tq = 14, tk = 52;
    boolean[][][] trees = {randomTree(r, 9), null};
    byte[] mask = treeBoolMask(trees, cuQ, cuK);
    float[] q = random(r, tq * H * D), k = random(r, tk * HKV * D), v = random(r, tk * HKV * D);
    try (Tensor tQ = Tensor.of(ctx, q, tq, H, D);
        Tensor tK = Tensor.of(ctx, k, tk, HKV, D);
        Tensor tV = Tensor.of(ctx, v, tk, HKV, D);
        Tensor tM = new Tensor(ctx, Dtype.U8, mask.length);
        Tensor tGot = new Tensor(ctx, Dtype.F32, tq, H, D);
        Tensor tWant = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      tM.write(mask);
      for (boolean causal : new boolean[] {true, false}) {
        AttentionDesc d = desc(causal, -1);
        d.setTrees(trees);
        ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tGot);
        AttentionDesc m = desc(causal, -1);
        m.setMask(tM);
        m.setMaskType(MaskType.MASK_BOOL.swigValue());
        ctx.attentionVarlen(m, cuQ, cuK, tQ, tK, tV, tWant);
        assertTrue("causal " + causal, maxDiff(tWant.toFloatArray(), tGot.toFloatArray()) < 1e-5f);
      }

      int[][] p = AttentionDesc.packTrees(trees);
      AttentionDesc d = desc(true, -1);
      d.setTrees(new int[] {0, 9}, p[1]);
      VkattnException e =
          assertThrows(
              VkattnException.class, () -> ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tGot));
      assertTrue(e.getMessage(), e.getMessage().contains("tree_indptr has 2 entries"));
      d.setTrees(p[0], java.util.Arrays.copyOf(p[1], 8));
      e = assertThrows(
              VkattnException.class, () -> ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tGot));
      assertTrue(e.getMessage(), e.getMessage().contains("the tree_mask array holds 8"));
    }
  }

  // Tree arguments that do not fit throw VkattnException with the reason,
  // never a Java runtime exception or a tree cut into range: a null or
  // oversized packTrees, empty arrays, prefix sums that are negative,
  // decreasing, 2^31 - 1 or another word count than t * ceil(t / 32). A
  // failed setTrees keeps the trees set before it (it used to clear them,
  // so the next call ran without its tree).
  @Test
  public void badTreeArgumentsThrow() {
    VkattnException e =
        assertThrows(VkattnException.class, () -> AttentionDesc.packTrees(null));
    assertEquals(Status.ERROR_INVALID_ARGUMENT, e.status());
    assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn: packTrees: masks is null"));
    // 300000 null rows: t * ceil(t / 32) passes int (it used to throw ArithmeticException).
    e = assertThrows(
            VkattnException.class,
            () -> AttentionDesc.packTrees(new boolean[][][] {new boolean[300000][]}));
    assertTrue(e.getMessage(), e.getMessage().contains("the trees pass 2^31 - 1 words"));
    // 262000 null rows fit int (2145256000 words): the rows are checked
    // before the 8.6 GB of words (it used to throw OutOfMemoryError).
    e = assertThrows(
            VkattnException.class,
            () -> AttentionDesc.packTrees(new boolean[][][] {null, new boolean[262000][]}));
    assertTrue(
        e.getMessage(), e.getMessage().contains("tree mask 1: row 0 has 0 entries, want 262000"));
    e = assertThrows(
            VkattnException.class,
            () -> desc(true, -1).setTrees(new boolean[][][] {new boolean[2][]}));
    assertTrue(e.getMessage(), e.getMessage().contains("row 0 has 0 entries, want 2"));

    int[] cuQ = {0, 9, 14}, cuK = {0, 40, 52};
    int tq = 14, tk = 52;
    boolean[][][] trees = {randomTree(new Random(17), 9), null};
    int[][] p = AttentionDesc.packTrees(trees);
    try (Tensor tQ = new Tensor(ctx, Dtype.F32, tq, H, D);
        Tensor tK = new Tensor(ctx, Dtype.F32, tk, HKV, D);
        Tensor tO = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      tQ.write(new float[tq * H * D]);
      tK.write(new float[tk * HKV * D]);
      AttentionDesc d = desc(true, -1);
      // Empty arrays: no tree_indptr entry at all, or words without tree_indptr.
      e = assertThrows(VkattnException.class, () -> d.setTrees(new int[0], p[1]));
      assertEquals("vkattn: tree_indptr needs batch + 1 >= 1 entries (has 0)", e.getMessage());
      e = assertThrows(VkattnException.class, () -> d.setTrees(null, new int[0]));
      assertEquals("vkattn: tree_mask given without tree_indptr", e.getMessage());
      e = assertThrows(VkattnException.class, () -> d.setTrees(null, p[1]));
      assertEquals("vkattn: tree_mask given without tree_indptr", e.getMessage());
      String[][] bad = {
        {"0 -9 -9", "desc->tree_indptr decreases at 1 (0 -> -9)"},
        {"0 -2147483648 0", "desc->tree_indptr decreases at 1 (0 -> -2147483648)"},
        {"0 100 9", "desc->tree_indptr decreases at 2 (100 -> 9)"},
        {"5 9 9", "desc->tree_indptr[0] is 5, must be 0"},
        {"0 2147483647 2147483647",
         "tree_indptr counts 2147483647 words, the tree_mask array holds 9"},
        {"0 8 8", "sequence 0 has 8 words, must be t * ceil(t / 32) = 9 (t = 9)"},
        {"0 0 9", "sequence 1 has 9 words, must be t * ceil(t / 32) = 5 (t = 5)"},
      };
      for (String[] c : bad) {
        int[] indptr =
            java.util.Arrays.stream(c[0].split(" ")).mapToInt(Integer::parseInt).toArray();
        AttentionDesc b = desc(true, -1);
        b.setTrees(indptr, p[1]);
        e = assertThrows(
                VkattnException.class, () -> ctx.attentionVarlen(b, cuQ, cuK, tQ, tK, tK, tO));
        assertEquals(Status.ERROR_INVALID_ARGUMENT, e.status());
        assertTrue(c[0] + ": " + e.getMessage(), e.getMessage().contains(c[1]));
      }
      // int[] words carry the uint32 bits: -1 is word 0xFFFFFFFF (every
      // key of the block visible), not an error.
      int[] all = new int[9];
      java.util.Arrays.fill(all, -1);
      d.setTrees(p[0], all);
      ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tK, tO);

      d.setTrees(p[0], p[1]);
      assertThrows(VkattnException.class, () -> d.setTrees(new int[0], p[1]));
      assertThrows(VkattnException.class, () -> d.setTrees(null, p[1]));
      // The 3-entry tree_indptr is still set: a call of one sequence says so.
      e = assertThrows(
              VkattnException.class,
              () -> ctx.attentionVarlen(d, new int[] {0, tq}, new int[] {0, tk}, tQ, tK, tK, tO));
      assertTrue(
          e.getMessage(), e.getMessage().contains("tree_indptr has 3 entries, the call needs 2"));
      ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tK, tO);
      d.setTrees(null, null); // clears them
      ctx.attentionVarlen(d, new int[] {0, tq}, new int[] {0, tk}, tQ, tK, tK, tO);
    }
  }

  /** Top-k lists, k entries for each query row of a packed batch: row i
   * of sequence b lists distinct random positions 0 .. u_b - 1, the first
   * row only k - 3 of them, then -1 pads. Returns the lists [tq * k] and
   * sets mask (each sequence's t x u block row-major) to 1 exactly where
   * the key is listed. */
  static int[] randomTopk(Random r, int[] cuQ, int[] cuK, int k, byte[] mask) {
    int[] lists = new int[cuQ[cuQ.length - 1] * k];
    java.util.Arrays.fill(lists, -1);
    int at = 0;
    for (int b = 0; b + 1 < cuQ.length; ++b) {
      int t = cuQ[b + 1] - cuQ[b], u = cuK[b + 1] - cuK[b];
      for (int i = 0; i < t; ++i, at += u) {
        int row = cuQ[b] + i, n = row == 0 ? k - 3 : k;
        int[] keys = new int[u];
        for (int j = 0; j < u; ++j) keys[j] = j;
        for (int x = 0; x < n; ++x) { // the first n of a partial shuffle
          int y = x + r.nextInt(u - x), j = keys[y];
          keys[y] = keys[x];
          lists[row * k + x] = j;
          mask[at + j] = 1;
        }
      }
    }
    return lists;
  }

  // A varlen call with top-k lists (K = 8, i32 [tq, K]; 3 queries over 40
  // keys, 1 over 25) equals the same call with the equivalent bool mask.
  @Test
  public void topkListsEqualTheirBoolMask() {
    Random r = new Random(16);
    int[] cuQ = {0, 3, 4}, cuK = {0, 40, 65};
    int tq = 4, tk = 65, kk = 8;
    byte[] mask = new byte[3 * 40 + 1 * 25]; // sum of t_b * u_b
    int[] lists = randomTopk(r, cuQ, cuK, kk, mask);
    float[] q = random(r, tq * H * D), k = random(r, tk * HKV * D), v = random(r, tk * HKV * D);
    try (Tensor tQ = Tensor.of(ctx, q, tq, H, D);
        Tensor tK = Tensor.of(ctx, k, tk, HKV, D);
        Tensor tV = Tensor.of(ctx, v, tk, HKV, D);
        Tensor tM = new Tensor(ctx, Dtype.U8, mask.length);
        Tensor tTopk = new Tensor(ctx, Dtype.I32, tq, kk);
        Tensor tGot = new Tensor(ctx, Dtype.F32, tq, H, D);
        Tensor tWant = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      tM.write(mask);
      tTopk.write(lists);
      for (boolean causal : new boolean[] {true, false}) {
        AttentionDesc d = desc(causal, -1);
        d.setTopkIndices(tTopk);
        assertEquals(tTopk, d.getTopkIndices());
        ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tGot);
        AttentionDesc m = desc(causal, -1);
        m.setMask(tM);
        m.setMaskType(MaskType.MASK_BOOL.swigValue());
        ctx.attentionVarlen(m, cuQ, cuK, tQ, tK, tV, tWant);
        assertTrue("causal " + causal, maxDiff(tWant.toFloatArray(), tGot.toFloatArray()) < 1e-5f);
      }
    }
  }

  // Top-k tensors that do not fit the call throw VkattnException naming the
  // problem: another dtype, another context, a rank other than 2 or 3, a
  // first dim other than the query tokens, a middle dim other than Hkv; a
  // Tensor closed before or after it was stored (the native desc would
  // keep a dangling pointer), also for selfCheck and a cache step.
  @Test
  public void badTopkListsThrow() {
    int[] cuQ = {0, 3, 4}, cuK = {0, 40, 65};
    int tq = 4, tk = 65, kk = 8;
    try (Context other = new Context();
        Tensor tQ = new Tensor(ctx, Dtype.F32, tq, H, D);
        Tensor tK = new Tensor(ctx, Dtype.F32, tk, HKV, D);
        Tensor tO = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      Random r = new Random(18);
      tQ.write(random(r, tq * H * D));
      tK.write(random(r, tk * HKV * D)); // a listed key would give a row other than 0
      Object[][] bad = {
        {new Tensor(ctx, Dtype.F32, tq, kk), "desc->topk_indices must be i32, got f32"},
        {new Tensor(ctx, Dtype.U8, tq, kk), "desc->topk_indices must be i32, got u8"},
        {new Tensor(other, Dtype.I32, tq, kk), "desc->topk_indices belongs to another context"},
        {new Tensor(ctx, Dtype.I32, tq * kk), "must be [rows, K] or [rows, Hkv, K], got [32]"},
        {new Tensor(ctx, Dtype.I32, tq, HKV, 1, kk), "got [4, 2, 1, 8]"},
        {new Tensor(ctx, Dtype.I32, tq + 1, kk),
         "desc->topk_indices' first dim is 5, must be the call's query tokens 4"},
        {new Tensor(ctx, Dtype.I32, tq - 1, HKV, kk), "desc->topk_indices' first dim is 3"},
        {new Tensor(ctx, Dtype.I32, tq, HKV + 1, kk),
         "desc->topk_indices' middle dim is 3, must be num_kv_heads 2"},
        {new Tensor(ctx, Dtype.I32, tq, H, kk),
         "desc->topk_indices' middle dim is 4, must be num_kv_heads 2"},
      };
      for (Object[] c : bad) {
        try (Tensor t = (Tensor) c[0]) {
          AttentionDesc d = desc(true, -1);
          d.setTopkIndices(t);
          VkattnException e =
              assertThrows(
                  VkattnException.class, () -> ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tK, tO));
          assertEquals(Status.ERROR_INVALID_ARGUMENT, e.status());
          assertTrue(e.getMessage(), e.getMessage().contains((String) c[1]));
        }
      }
      // K = 0 (every row empty) and lists of out-of-range positions (all
      // skipped) are valid lists: the rows come out 0.
      for (long[] shape : new long[][] {{tq, 0}, {tq, HKV, 0}}) {
        try (Tensor t = new Tensor(ctx, Dtype.I32, shape)) {
          AttentionDesc d = desc(true, -1);
          d.setTopkIndices(t);
          ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tK, tO);
          assertEquals(0f, maxDiff(new float[tq * H * D], tO.toFloatArray()), 0f);
        }
      }
      try (Tensor t = new Tensor(ctx, Dtype.I32, tq, kk)) {
        int[] far = new int[tq * kk];
        for (int i = 0; i < far.length; ++i)
          far[i] = i % 2 == 0 ? Integer.MIN_VALUE : Integer.MAX_VALUE;
        t.write(far);
        AttentionDesc d = desc(true, -1);
        d.setTopkIndices(t);
        ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tK, tO);
        assertEquals(0f, maxDiff(new float[tq * H * D], tO.toFloatArray()), 0f);
      }

      Tensor closed = new Tensor(ctx, Dtype.I32, tq, kk);
      closed.close();
      AttentionDesc before = desc(true, -1);
      before.setTopkIndices(closed); // closed, then stored
      VkattnException e =
          assertThrows(
              VkattnException.class, () -> ctx.attentionVarlen(before, cuQ, cuK, tQ, tK, tK, tO));
      assertEquals("vkattn: AttentionDesc.topkIndices: this Tensor is closed", e.getMessage());
      Tensor t = new Tensor(ctx, Dtype.I32, tq, kk);
      AttentionDesc after = desc(true, -1);
      after.setTopkIndices(t);
      t.close(); // stored, then closed
      e = assertThrows(
              VkattnException.class, () -> ctx.attentionVarlen(after, cuQ, cuK, tQ, tK, tK, tO));
      assertEquals("vkattn: AttentionDesc.topkIndices: this Tensor is closed", e.getMessage());
      e = assertThrows(
              VkattnException.class,
              () -> ctx.selfCheck(after, Dtype.F32.swigValue(), Dtype.F32.swigValue(), 0, 1));
      assertEquals("vkattn: AttentionDesc.topkIndices: this Tensor is closed", e.getMessage());
      KvCacheDesc kd = new KvCacheDesc();
      kd.setNumLayers(1);
      kd.setNumKvHeads(HKV);
      kd.setHeadDim(D);
      kd.setNumPages(4);
      kd.setPageSize(16);
      kd.setDtype(Dtype.F32);
      try (KvCache cache = new KvCache(ctx, kd);
          Step step = cache.begin(new long[] {1}, new int[] {1});
          Tensor k1 = new Tensor(ctx, Dtype.F32, 1, HKV, D);
          Tensor q1 = new Tensor(ctx, Dtype.F32, 1, H, D);
          Tensor o1 = new Tensor(ctx, Dtype.F32, 1, H, D)) {
        k1.write(new float[HKV * D]);
        q1.write(new float[H * D]);
        step.append(0, k1, k1);
        e = assertThrows(VkattnException.class, () -> step.attention(0, after, q1, o1));
        assertEquals("vkattn: AttentionDesc.topkIndices: this Tensor is closed", e.getMessage());
      }
      after.setTopkIndices(null); // cleared: the call runs
      ctx.attentionVarlen(after, cuQ, cuK, tQ, tK, tK, tO);
    }
  }

  // A reference result joined with per-head sinks: lse' = logaddexp(lse,
  // sink), out' = out * exp(lse - lse').
  static float[][] withSinks(float[][] ref, float[] sinks, int h, int dv) {
    float[] out = ref[0].clone(), lse = ref[1].clone();
    for (int row = 0; row < lse.length; ++row) {
      double l = ref[1][row], s = sinks[row % h], m = Math.max(l, s);
      double j = m + Math.log(Math.exp(l - m) + Math.exp(s - m));
      lse[row] = (float) j;
      for (int e = 0; e < dv; ++e) out[row * dv + e] = (float) (ref[0][row * dv + e] * Math.exp(l - j));
    }
    return new float[][] {out, lse};
  }

  @Test
  public void sinksJoinTheDenominator() {
    Random r = new Random(5);
    int[] cuQ = {0, 3, 5, 6}, cuK = {0, 7, 9, 13};
    int tq = 6, tk = 13;
    float[] q = random(r, tq * H * D), k = random(r, tk * HKV * D), v = random(r, tk * HKV * D);
    float[] sinks = new float[H];
    for (int h = 0; h < H; ++h) sinks[h] = 0.5f * h - 1f;
    float[][] ref = withSinks(reference(q, k, v, cuQ, cuK, H, HKV, D, D, true, -1), sinks, H, D);
    try (Tensor tQ = Tensor.of(ctx, q, tq, H, D);
        Tensor tK = Tensor.of(ctx, k, tk, HKV, D);
        Tensor tV = Tensor.of(ctx, v, tk, HKV, D);
        Tensor tS = Tensor.of(ctx, sinks, H);
        Tensor tO = new Tensor(ctx, Dtype.F32, tq, H, D);
        Tensor tL = new Tensor(ctx, Dtype.F32, tq, H)) {
      AttentionDesc d = desc(true, -1);
      d.setLse(tL);
      d.setSinks(tS);
      ctx.attentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      assertTrue("out", maxDiff(ref[0], tO.toFloatArray()) < 1e-5f);
      assertTrue("lse", maxDiff(ref[1], tL.toFloatArray()) < 1e-5f);
    }
  }

  @Test
  public void f16ThroughShortArrays() {
    Random r = new Random(2);
    int[] cuQ = {0, 2}, cuK = {0, 5};
    int tq = 2, tk = 5;
    float[] q = new float[tq * H * D], k = new float[tk * HKV * D], v = new float[tk * HKV * D];
    for (float[] a : new float[][] {q, k, v})
      for (int i = 0; i < a.length; ++i) a[i] = (r.nextInt(1024) - 512) / 1024f;
    short[][] h = new short[3][];
    float[][] src = {q, k, v};
    for (int n = 0; n < 3; ++n) {
      h[n] = new short[src[n].length];
      for (int i = 0; i < h[n].length; ++i) h[n][i] = toHalf(src[n][i]);
      for (int i = 0; i < h[n].length; ++i) assertEquals(src[n][i], fromHalf(h[n][i]), 0f);
    }
    float[][] ref = reference(q, k, v, cuQ, cuK, H, HKV, D, D, true, -1);
    try (Tensor tQ = Tensor.of(ctx, Dtype.F16, h[0], tq, H, D);
        Tensor tK = Tensor.of(ctx, Dtype.F16, h[1], tk, HKV, D);
        Tensor tV = Tensor.of(ctx, Dtype.F16, h[2], tk, HKV, D);
        Tensor tO = new Tensor(ctx, Dtype.F16, tq, H, D)) {
      ctx.attentionVarlen(desc(true, -1), cuQ, cuK, tQ, tK, tV, tO);
      short[] o = tO.toShortArray();
      float[] of = new float[o.length];
      for (int i = 0; i < o.length; ++i) of[i] = fromHalf(o[i]);
      assertTrue(maxDiff(ref[0], of) < 2e-3f);
    }
  }

  @Test
  public void mergeOfTwoKeyHalvesEqualsFullAttention() {
    Random r = new Random(3);
    int n = 3, u = 6;
    float[] q = random(r, n * H * D), k = random(r, u * HKV * D), v = random(r, u * HKV * D);
    float[][] full = reference(q, k, v, new int[] {0, n}, new int[] {0, u}, H, HKV, D, D, false, -1);
    int half = u / 2 * HKV * D;
    try (Tensor tQ = Tensor.of(ctx, q, n, H, D);
        Tensor k1 = Tensor.of(ctx, java.util.Arrays.copyOfRange(k, 0, half), u / 2, HKV, D);
        Tensor v1 = Tensor.of(ctx, java.util.Arrays.copyOfRange(v, 0, half), u / 2, HKV, D);
        Tensor k2 = Tensor.of(ctx, java.util.Arrays.copyOfRange(k, half, k.length), u / 2, HKV, D);
        Tensor v2 = Tensor.of(ctx, java.util.Arrays.copyOfRange(v, half, v.length), u / 2, HKV, D);
        Tensor o1 = new Tensor(ctx, Dtype.F32, n, H, D);
        Tensor o2 = new Tensor(ctx, Dtype.F32, n, H, D);
        Tensor l1 = new Tensor(ctx, Dtype.F32, n, H);
        Tensor l2 = new Tensor(ctx, Dtype.F32, n, H)) {
      int[] cuQ = {0, n}, cuK = {0, u / 2};
      AttentionDesc d = desc(false, -1);
      d.setLse(l1);
      ctx.attentionVarlen(d, cuQ, cuK, tQ, k1, v1, o1);
      d.setLse(l2);
      ctx.attentionVarlen(d, cuQ, cuK, tQ, k2, v2, o2);
      ctx.attentionMerge(o1, l1, o2, l2, o1, l1); // in place into o1, l1
      assertTrue(maxDiff(full[0], o1.toFloatArray()) < 1e-5f);
      assertTrue(maxDiff(full[1], l1.toFloatArray()) < 1e-5f);
    }
  }

  @Test
  public void byteBuffersDirectAndHeap() {
    float[] data = random(new Random(4), 24);
    ByteBuffer in = ByteBuffer.allocateDirect(96).order(ByteOrder.nativeOrder());
    in.asFloatBuffer().put(data);
    try (Tensor t = new Tensor(ctx, Dtype.F32, 2, 3, 4)) {
      t.write(in);
      assertArrayEquals(data, t.toFloatArray(), 0f);
      ByteBuffer outDirect = ByteBuffer.allocateDirect(96).order(ByteOrder.nativeOrder());
      t.read(outDirect);
      float[] back = new float[24];
      outDirect.asFloatBuffer().get(back);
      assertArrayEquals(data, back, 0f);
      ByteBuffer outHeap = ByteBuffer.allocate(96).order(ByteOrder.nativeOrder());
      t.read(outHeap);
      outHeap.asFloatBuffer().get(back);
      assertArrayEquals(data, back, 0f);
      // A direct buffer with the wrong number of remaining bytes.
      VkattnException e = assertThrows(VkattnException.class, () -> t.write(ByteBuffer.allocateDirect(95)));
      assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_tensor_write: "));
    }
  }

  @Test
  public void gettersAndDeviceInfo() {
    try (Tensor t = new Tensor(ctx, Dtype.BF16, 5, 0, 3)) {
      assertEquals(Dtype.BF16, t.dtype());
      assertArrayEquals(new long[] {5, 0, 3}, t.shape());
      assertEquals(0, t.nbytes());
      assertEquals(0, t.toShortArray().length);
    }
    assertEquals(Vkattn.VERSION_MAJOR * 10000 + Vkattn.VERSION_MINOR * 100 + Vkattn.VERSION_PATCH,
        Vkattn.version());
    long v = Vkattn.version();
    assertEquals(Vkattn.VERSION_STRING, (v / 10000) + "." + (v / 100 % 100) + "." + (v % 100));
    assertEquals(2, Vkattn.dtypeSize(Dtype.F16));
    assertTrue(Vkattn.deviceCount() >= 1);
    DeviceInfo info = ctx.deviceInfo();
    assertFalse(info.getName().isEmpty());
    assertTrue(info.getMaxBufferRange() > 0);
    boolean found = false;
    for (long i = 0; i < Vkattn.deviceCount(); ++i) found |= Vkattn.deviceInfo(i).getName().equals(info.getName());
    assertTrue(found);
    assertEquals("invalid argument", Vkattn.statusString(Status.ERROR_INVALID_ARGUMENT));
  }

  // ---- a closed Tensor stored in a desc raises, naming the field ----

  @Test
  public void closedTensorInTheDescRaises() {
    int[] cu = {0, 2};
    try (Tensor q = new Tensor(ctx, Dtype.F32, 2, H, D);
        Tensor kv = new Tensor(ctx, Dtype.F32, 2, HKV, D);
        Tensor o = new Tensor(ctx, Dtype.F32, 2, H, D)) {
      q.write(new float[2 * H * D]);
      kv.write(new float[2 * HKV * D]);
      String[] fields = {"lse", "sinks", "alibiSlopes"};
      for (String f : fields) {
        AttentionDesc d = desc(true, -1);
        Tensor t = f.equals("lse") ? new Tensor(ctx, Dtype.F32, 2, H) : new Tensor(ctx, Dtype.F32, H);
        if (f.equals("lse")) d.setLse(t);
        if (f.equals("sinks")) d.setSinks(t);
        if (f.equals("alibiSlopes")) d.setAlibiSlopes(t);
        t.close();  // stored, then closed: the desc must not pass it on
        VkattnException e =
            assertThrows(VkattnException.class, () -> ctx.attentionVarlen(d, cu, cu, q, kv, kv, o));
        assertEquals(Status.ERROR_INVALID_ARGUMENT, e.status());
        assertEquals("vkattn: AttentionDesc." + f + ": this Tensor is closed", e.getMessage());
      }
      // The context is still fine.
      ctx.attentionVarlen(desc(true, -1), cu, cu, q, kv, kv, o);
    }
  }

  // ---- errors carry the C message ----

  @Test
  public void badInputRaisesWithTheLibraryMessage() {
    try (Tensor t = new Tensor(ctx, Dtype.F32, 2, 3)) {
      VkattnException e = assertThrows(VkattnException.class, () -> t.write(new float[5]));
      assertEquals(Status.ERROR_INVALID_ARGUMENT, e.status());
      assertEquals("vkattn_tensor_write: nbytes 20 != tensor size 24", e.getMessage());
      e = assertThrows(VkattnException.class, () -> t.read(new float[7]));
      assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_tensor_read: nbytes 28"));
      e = assertThrows(VkattnException.class, () -> t.write(new short[6]));
      assertEquals("vkattn: a 16-bit array does not fit a f32 tensor", e.getMessage());
    }
    VkattnException e = assertThrows(VkattnException.class, () -> new Tensor(ctx, Dtype.F32, 1, 2, 3, 4, 5));
    assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_tensor_create: "));
    e = assertThrows(VkattnException.class, () -> new Context(1000, 0));
    assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_context_create: "));
    try (Tensor q = new Tensor(ctx, Dtype.F32, 2, H, D); Tensor o = new Tensor(ctx, Dtype.F32, 2, H, D)) {
      AttentionDesc d = desc(false, -1);
      d.setHeadDim(0);
      e = assertThrows(VkattnException.class, () -> ctx.attentionVarlen(d, new int[] {0, 2}, new int[] {0, 2}, q, q, q, o));
      assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_attention_varlen: "));
      // Arrays whose length the C API cannot see are checked by the binding.
      e = assertThrows(VkattnException.class, () -> ctx.attentionVarlen(desc(false, -1), new int[] {0, 2}, new int[] {0}, q, q, q, o));
      assertTrue(e.getMessage(), e.getMessage().contains("cu_seqlens_k has 1 entries"));
    }
  }

  // uint32_t fields are Java longs: a value past 0 .. 2^32 - 1 throws and
  // the field keeps its value (it was cut to 32 bits: 2^32 + 8 heads ran
  // as 8, a chunk of -1 as 4294967295).
  @Test
  public void uint32FieldsRefuseLongsThatDoNotFit() {
    AttentionDesc d = desc(false, -1);
    VkattnException e = assertThrows(VkattnException.class, () -> d.setNumHeads((1L << 32) + H));
    assertEquals(Status.ERROR_INVALID_ARGUMENT, e.status());
    assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn: " + ((1L << 32) + H) + " does not fit the uint32_t"));
    assertEquals(H, d.getNumHeads());
    e = assertThrows(VkattnException.class, () -> d.setChunkSize(-1));
    assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn: -1 does not fit the uint32_t"));
    assertEquals(0, d.getChunkSize());
    d.setChunkSize(4294967295L); // the largest uint32_t is taken
    assertEquals(4294967295L, d.getChunkSize());
    KvCacheDesc kd = new KvCacheDesc();
    assertThrows(VkattnException.class, () -> kd.setNumPages(Long.MAX_VALUE));
    assertThrows(VkattnException.class, () -> kd.setFlags(-1L));
    RopeDesc rd = new RopeDesc();
    assertThrows(VkattnException.class, () -> rd.setRotaryDim(1L << 33));
  }

  // ---- misuse fails cleanly ----

  @Test
  public void closeTwiceAndUseAfterClose() {
    Tensor t = new Tensor(ctx, Dtype.F32, 4);
    assertTrue(t.isOpen());
    t.close();
    t.close();
    assertFalse(t.isOpen());
    VkattnException e = assertThrows(VkattnException.class, () -> t.write(new float[4]));
    assertEquals("vkattn: this Tensor is closed", e.getMessage());
    assertThrows(VkattnException.class, t::toFloatArray);
    assertThrows(VkattnException.class, t::dtype);

    Context c = new Context();
    Tensor live = Tensor.of(c, new float[] {1, 2, 3}, 3);
    c.close();
    c.close();
    e = assertThrows(VkattnException.class, c::synchronize);
    assertEquals("vkattn: this Context is closed", e.getMessage());
    assertThrows(VkattnException.class, () -> new Tensor(c, Dtype.F32, 1));
    // Objects keep their context alive: the tensor still works.
    assertArrayEquals(new float[] {1, 2, 3}, live.toFloatArray(), 0f);
    live.close();

    // Plain structs can be deleted explicitly; their fields then raise.
    AttentionDesc d = desc(true, -1);
    d.delete();
    d.delete();
    e = assertThrows(VkattnException.class, () -> d.setNumHeads(1));
    assertEquals("vkattn: this AttentionDesc was deleted", e.getMessage());
    DeviceInfo info = ctx.deviceInfo();
    info.delete();
    assertThrows(VkattnException.class, info::getName);
  }

  @Test
  public void nullArgumentsRaise() {
    try (Tensor t = new Tensor(ctx, Dtype.F32, 2)) {
      assertThrows(VkattnException.class, () -> t.write((float[]) null));
      assertThrows(VkattnException.class, () -> t.read((int[]) null));
      assertThrows(VkattnException.class, () -> t.write((ByteBuffer) null));
      assertThrows(VkattnException.class, () -> new Tensor(null, Dtype.F32, 1));
      assertThrows(VkattnException.class, () -> new Tensor(ctx, Dtype.F32, (long[]) null));
      VkattnException e = assertThrows(VkattnException.class,
          () -> ctx.attentionVarlen(null, new int[] {0, 2}, new int[] {0, 2}, t, t, t, t));
      assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_attention_varlen: "));
      assertThrows(VkattnException.class, () -> ctx.attentionVarlen(desc(false, -1), null, null, t, t, t, t));
      assertThrows(VkattnException.class, () -> ctx.attentionMerge(null, null, null, null, null, null));
    }
    Tensor closed = new Tensor(ctx, Dtype.F32, 2, H, D);
    closed.close();
    try (Tensor o = new Tensor(ctx, Dtype.F32, 2, H, D)) {
      VkattnException e = assertThrows(VkattnException.class,
          () -> ctx.attentionVarlen(desc(false, -1), new int[] {0, 2}, new int[] {0, 2}, closed, o, o, o));
      assertNotNull(e.getMessage());
      assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_attention_varlen: "));
    }
  }

  // ---- paged KV cache ----

  static KvCacheDesc cacheDesc(int layers, int pages) {
    KvCacheDesc d = new KvCacheDesc();
    d.setNumLayers(layers);
    d.setNumKvHeads(HKV);
    d.setHeadDim(D);
    d.setPageSize(4);
    d.setNumPages(pages);
    d.setDtype(Dtype.F32);
    return d;
  }

  @Test
  public void kvCacheAppendCommitReadForkTruncate() {
    Random r = new Random(5);
    int row = HKV * D;
    try (KvCache cache = new KvCache(ctx, cacheDesc(2, 8))) {
      assertEquals(Dtype.F32, cache.dtype());
      assertEquals(8, cache.numFreePages());
      float[][] k = {random(r, 8 * row), random(r, 8 * row)};
      float[][] v = {random(r, 8 * row), random(r, 8 * row)};
      try (Step step = cache.begin(new long[] {7, 9}, new int[] {5, 3})) {
        assertTrue(step.isActive());
        for (int l = 0; l < 2; ++l) {
          try (Tensor tk = Tensor.of(ctx, k[l], 8, HKV, D); Tensor tv = Tensor.of(ctx, v[l], 8, HKV, D)) {
            step.append(l, tk, tv);
          }
        }
        step.commit();
        assertFalse(step.isActive());
        VkattnException e = assertThrows(VkattnException.class, step::commit);
        assertEquals("vkattn: this Step is already committed or aborted", e.getMessage());
      }
      assertEquals(5, cache.length(7));
      assertEquals(3, cache.length(9));
      assertEquals(0, cache.length(1));
      assertEquals(8 - 2 - 1, cache.numFreePages()); // 5 tokens: 2 pages of 4; 3 tokens: 1
      float[] kOut = new float[3 * row], vOut = new float[3 * row];
      cache.read(1, 9, 0, 3, kOut, vOut);
      assertArrayEquals(java.util.Arrays.copyOfRange(k[1], 5 * row, 8 * row), kOut, 0f);
      assertArrayEquals(java.util.Arrays.copyOfRange(v[1], 5 * row, 8 * row), vOut, 0f);
      cache.fork(7, 8);
      assertEquals(5, cache.length(8));
      cache.truncate(8, 2);
      assertEquals(2, cache.length(8));
      float[] k8 = new float[2 * row], v8 = new float[2 * row];
      cache.read(0, 8, 0, 2, k8, v8);
      assertArrayEquals(java.util.Arrays.copyOfRange(k[0], 0, 2 * row), k8, 0f);
      cache.remove(8);
      assertEquals(0, cache.length(8));
      // A step closed without commit is aborted: nothing changes.
      try (Step s = cache.begin(new long[] {7, 10}, new int[] {1, 2})) {
        assertTrue(s.isActive());
      }
      assertEquals(5, cache.length(7));
      assertEquals(0, cache.length(10));
      assertEquals(8 - 2 - 1, cache.numFreePages());
    }
  }

  @Test
  public void kvCacheErrorsAndMisuse() {
    try (KvCache cache = new KvCache(ctx, cacheDesc(1, 2))) {
      VkattnException e = assertThrows(VkattnException.class, () -> cache.remove(42));
      assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_kv_cache_remove: "));
      e = assertThrows(VkattnException.class, () -> cache.begin(new long[] {1}, new int[] {100}));
      assertEquals(Status.ERROR_CACHE_FULL, e.status());
      assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_step_begin: "));
      assertEquals(2, cache.numFreePages());
      e = assertThrows(VkattnException.class, () -> cache.begin(new long[] {1, 2}, new int[] {1}));
      assertEquals("vkattn: 2 sequence ids but 1 token counts", e.getMessage());
      e = assertThrows(VkattnException.class, () -> cache.begin(null, new int[] {1}));
      assertEquals("vkattn: the seqIds array is null", e.getMessage());
      e = assertThrows(VkattnException.class, () -> cache.read(0, 1, 0, 0, new short[0], new short[0]));
      assertEquals("vkattn: a 16-bit array does not fit a f32 cache", e.getMessage());
      Step s = cache.begin(new long[] {1}, new int[] {1});
      e = assertThrows(VkattnException.class, () -> cache.fork(1, 2));
      assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_kv_cache_fork: "));
      e = assertThrows(VkattnException.class, () -> s.append(0, null, null));
      assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_step_append: "));
      s.abort();
      s.abort();
      e = assertThrows(VkattnException.class, () -> s.append(0, null, null));
      assertEquals("vkattn: this Step is already committed or aborted", e.getMessage());
      s.close();
      s.close();
      e = assertThrows(VkattnException.class, s::commit);
      assertEquals("vkattn: this Step is closed", e.getMessage());
      e = assertThrows(VkattnException.class, () -> new KvCache(ctx, null));
      assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_kv_cache_create: "));
    }
    KvCache closed = new KvCache(ctx, cacheDesc(1, 1));
    Step open = closed.begin(new long[] {3}, new int[] {2});
    closed.close();
    closed.close();
    VkattnException e = assertThrows(VkattnException.class, () -> closed.length(1));
    assertEquals("vkattn: this KvCache is closed", e.getMessage());
    open.close(); // a step keeps its cache alive until it ends
  }
}
