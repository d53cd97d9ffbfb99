// The C# binding on the default device (lavapipe in CI), tiny shapes. NUnit 2.6.
using System;
using NUnit.Framework;
using Vkattn;

[TestFixture]
public class VkattnTests {
  const int H = 4, Hkv = 2, D = 8;
  Context ctx;

  [TestFixtureSetUp]
  public void Open() { ctx = new Context(); }

  [TestFixtureTearDown]
  public void Close() { ctx.Dispose(); }

  // ---- plain reference attention (bottom-right causal, window, GQA) ----

  // Returns out [tq*h*d] and lse [tq*h] for a packed batch.
  internal static float[][] Reference(float[] q, float[] k, float[] v, int[] cuQ, int[] cuK, int h,
                             int hkv, int d, bool causal, int window) {
    return Reference(q, k, v, cuQ, cuK, h, hkv, d, causal, window, null, null);
  }

  // The same with an attention variant's functions on the host (null: none):
  // mask(seq, head, qPos, kPos), score(score, seq, head, qPos, kPos).
  internal static float[][] Reference(float[] q, float[] k, float[] v, int[] cuQ, int[] cuK, int h,
                             int hkv, int d, bool causal, int window,
                             Func<int, int, int, int, bool> mask,
                             Func<double, int, int, int, int, double> score) {
    int tq = cuQ[cuQ.Length - 1];
    var out_ = new float[tq * h * d];
    var lse = new float[tq * h];
    double scale = 1.0 / Math.Sqrt(d);
    for (int b = 0; b + 1 < cuQ.Length; ++b) {
      int t = cuQ[b + 1] - cuQ[b], u = cuK[b + 1] - cuK[b];
      for (int i = 0; i < t; ++i) {
        int pos = u - t + i;
        for (int hh = 0; hh < h; ++hh) {
          int kh = hh / (h / hkv), row = (cuQ[b] + i) * h + hh;
          var s = new double[u];
          double m = double.NegativeInfinity;
          for (int j = 0; j < u; ++j) {
            s[j] = double.NegativeInfinity;
            if ((causal && j > pos) || (window >= 0 && pos - j > window)) continue;
            if (mask != null && !mask(b, hh, pos, j)) continue;
            double dot = 0;
            for (int e = 0; e < d; ++e) dot += (double)q[row * d + e] * k[((cuK[b] + j) * hkv + kh) * d + e];
            s[j] = score == null ? dot * scale : score(dot * scale, b, hh, pos, j);
            m = Math.Max(m, s[j]);
          }
          double l = 0;
          var acc = new double[d];
          for (int j = 0; j < u; ++j) {
            if (double.IsNegativeInfinity(s[j])) continue;
            double p = Math.Exp(s[j] - m);
            l += p;
            for (int e = 0; e < d; ++e) acc[e] += p * v[((cuK[b] + j) * hkv + kh) * d + e];
          }
          for (int e = 0; e < d; ++e) out_[row * d + e] = l > 0 ? (float)(acc[e] / l) : 0f;
          lse[row] = (float)(m + Math.Log(l));
        }
      }
    }
    return new[] { out_, lse };
  }

  internal static float[] Randoms(Random r, int n) {
    var a = new float[n];
    for (int i = 0; i < n; ++i) a[i] = (float)r.NextDouble() - 0.5f;
    return a;
  }

  internal static double MaxDiff(float[] a, float[] b) {
    Assert.AreEqual(a.Length, b.Length);
    double m = 0;
    for (int i = 0; i < a.Length; ++i) m = Math.Max(m, Math.Abs(a[i] - b[i]));
    return m;
  }

  internal static AttentionDesc Desc(bool causal, int window) {
    var d = new AttentionDesc();
    d.NumHeads = H;
    d.NumKvHeads = Hkv;
    d.HeadDim = D;
    d.Causal = causal ? 1u : 0u;
    d.WindowLeft = window;
    return d;
  }

  static void Throws(string prefix, TestDelegate call) {
    var e = Assert.Throws<VkattnException>(call);
    StringAssert.StartsWith(prefix, e.Message);
  }

  // ---- results ----

  [Test]
  public void VarlenCausalWindowMatchesReference() {
    var r = new Random(1);
    int[] cuQ = { 0, 3, 5, 6 }, cuK = { 0, 7, 9, 13 };
    const int tq = 6, tk = 13, window = 2;
    float[] q = Randoms(r, tq * H * D), k = Randoms(r, tk * Hkv * D), v = Randoms(r, tk * Hkv * D);
    var reference = Reference(q, k, v, cuQ, cuK, H, Hkv, D, true, window);
    using (var tQ = Tensor.Of(ctx, q, tq, H, D))
    using (var tK = Tensor.Of(ctx, k, tk, Hkv, D))
    using (var tV = Tensor.Of(ctx, v, tk, Hkv, D))
    using (var tO = new Tensor(ctx, Dtype.F32, tq, H, D))
    using (var tL = new Tensor(ctx, Dtype.F32, tq, H)) {
      var d = Desc(true, window);
      d.Lse = tL;
      ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      Assert.Less(MaxDiff(reference[0], tO.ToFloatArray()), 1e-5);
      Assert.Less(MaxDiff(reference[1], tL.ToFloatArray()), 1e-5);
    }
  }

  // Attention variants (user functions): documents packed in one sequence
  // (an I32 id per position, slot 0) and a per-head slope on the distance
  // (F32, slot 1), against the reference given the same functions.
  [Test]
  public void VariantDocumentMaskAndScoreFunctionMatchTheReference() {
    var r = new Random(7);
    int[] cuQ = { 0, 12, 15 }, cuK = { 0, 12, 20 };  // (12, 12): three documents; (3, 8)
    const int tq = 15, tk = 20;
    int[] doc = { 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2 };
    float[] slopes = { 0.1f, -0.2f, 0.3f, 0.05f };
    const string source =
        "bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {\n" +
        "  return vkattn_param_i32(0, uint(q_pos)) == vkattn_param_i32(0, uint(k_pos));\n" +
        "}\n" +
        "float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {\n" +
        "  return score + vkattn_param_f32(1, head) * float(k_pos - q_pos);\n" +
        "}\n";
    float[] q = Randoms(r, tq * H * D), k = Randoms(r, tk * Hkv * D), v = Randoms(r, tk * Hkv * D);
    var reference = Reference(q, k, v, cuQ, cuK, H, Hkv, D, true, -1,
                              (b, h, qp, kp) => doc[qp] == doc[kp],
                              (sc, b, h, qp, kp) => sc + (double)slopes[h] * (float)(kp - qp));
    using (var variant = new Variant(ctx, source, Dtype.I32, Dtype.F32))
    using (var tDoc = new Tensor(ctx, Dtype.I32, doc.Length))
    using (var tSlopes = Tensor.Of(ctx, slopes, H))
    using (var tQ = Tensor.Of(ctx, q, tq, H, D))
    using (var tK = Tensor.Of(ctx, k, tk, Hkv, D))
    using (var tV = Tensor.Of(ctx, v, tk, Hkv, D))
    using (var tO = new Tensor(ctx, Dtype.F32, tq, H, D))
    using (var tL = new Tensor(ctx, Dtype.F32, tq, H)) {
      tDoc.Write(doc);
      var d = Desc(true, -1);
      d.Lse = tL;
      d.Variant = variant;
      d.SetVariantParam(0, tDoc);
      d.SetVariantParam(1, tSlopes);
      ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      Assert.Less(MaxDiff(reference[0], tO.ToFloatArray()), 1e-5);
      Assert.Less(MaxDiff(reference[1], tL.ToFloatArray()), 1e-5);
      // A declared slot left empty, then a disposed variant: refused.
      d.SetVariantParam(1, null);
      var e = Assert.Throws<VkattnException>(() => ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO));
      Assert.AreEqual(Status.ERROR_INVALID_ARGUMENT, e.Status);
      d.SetVariantParam(1, tSlopes);
      variant.Dispose();
      Assert.IsFalse(variant.IsOpen);
      Assert.Throws<VkattnException>(() => ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO));
    }
    // A source that does not compile: the compiler's line.
    var bad = Assert.Throws<VkattnException>(() => new Variant(
        ctx, "bool vkattn_mask_mod(uint seq, uint head, int q, int k) {\n  return x;\n}\n"));
    StringAssert.Contains("line 2", bad.Message);
  }

  // WindowRight 0 without causal is causal; ChunkSize 1 leaves each query
  // its own key, as WindowLeft 0 does.
  [Test]
  public void RightWindowAndChunksMatchTheirEquivalents() {
    var r = new Random(3);
    int[] cuQ = { 0, 3, 5, 6 }, cuK = { 0, 7, 9, 13 };
    const int tq = 6, tk = 13, window = 2;
    float[] q = Randoms(r, tq * H * D), k = Randoms(r, tk * Hkv * D), v = Randoms(r, tk * Hkv * D);
    using (var tQ = Tensor.Of(ctx, q, tq, H, D))
    using (var tK = Tensor.Of(ctx, k, tk, Hkv, D))
    using (var tV = Tensor.Of(ctx, v, tk, Hkv, D))
    using (var tO = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      var d = Desc(false, window);
      d.WindowRight = 0;
      ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      Assert.Less(MaxDiff(Reference(q, k, v, cuQ, cuK, H, Hkv, D, true, window)[0],
                          tO.ToFloatArray()), 1e-5);
      d = Desc(true, -1);
      d.ChunkSize = 1;
      ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      Assert.Less(MaxDiff(Reference(q, k, v, cuQ, cuK, H, Hkv, D, true, 0)[0], tO.ToFloatArray()),
                  1e-5);
    }
  }

  // A bidirectional span over each whole sequence makes causal attention
  // see every key: it equals attention without causal. A span_indptr that
  // does not fit the batch throws.
  [Test]
  public void SpansOverWholeSequencesUndoCausal() {
    var r = new Random(4);
    int[] cuQ = { 0, 3, 5, 6 }, cuK = { 0, 7, 9, 13 };
    const int tq = 6, tk = 13;
    float[] q = Randoms(r, tq * H * D), k = Randoms(r, tk * Hkv * D), v = Randoms(r, tk * Hkv * D);
    using (var tQ = Tensor.Of(ctx, q, tq, H, D))
    using (var tK = Tensor.Of(ctx, k, tk, Hkv, D))
    using (var tV = Tensor.Of(ctx, v, tk, Hkv, D))
    using (var tO = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      var d = Desc(true, -1);
      d.SetSpans(new int[] { 0, 1, 2, 3 }, new int[] { 0, 7, 0, 2, 0, 4 });
      ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      Assert.Less(MaxDiff(Reference(q, k, v, cuQ, cuK, H, Hkv, D, false, -1)[0],
                          tO.ToFloatArray()), 1e-5);
      d.SetSpans(new int[] { 0, 1 }, new int[] { 0, 7 });
      var e = Assert.Throws<VkattnException>(() => ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO));
      StringAssert.Contains("span_indptr has 2 entries", e.Message);
    }
  }

  // A draft tree of n tokens, node i's parent drawn from [0, i): row i of
  // the [n, n] matrix is its parent's row plus i itself.
  static bool[,] RandomTree(Random r, int n) {
    var m = new bool[n, n];
    for (int i = 0; i < n; ++i) {
      int parent = i > 0 ? r.Next(i) : -1;
      for (int j = 0; j < i && parent >= 0; ++j) m[i, j] = m[parent, j];
      m[i, i] = true;
    }
    return m;
  }

  // The bool mask equal to the trees (1 where the key is before the
  // queries' own block or the tree bit is set; all 1 without a tree): each
  // sequence's t x u block row-major, in batch order.
  static byte[] TreeBoolMask(bool[][,] trees, int[] cuQ, int[] cuK) {
    int n = 0;
    for (int b = 0; b < trees.Length; ++b) n += (cuQ[b + 1] - cuQ[b]) * (cuK[b + 1] - cuK[b]);
    var mask = new byte[n];
    int at = 0;
    for (int b = 0; b < trees.Length; ++b) {
      int t = cuQ[b + 1] - cuQ[b], u = cuK[b + 1] - cuK[b];
      for (int i = 0; i < t; ++i)
        for (int j = 0; j < u; ++j, ++at)
          mask[at] = (byte)(trees[b] == null || j < u - t || trees[b][i, j - (u - t)] ? 1 : 0);
    }
    return mask;
  }

  [Test]
  public void PackTreesPacksBitsLowFirst() {
    var m = new bool[33, 33];
    for (int i = 0; i < 33; ++i) m[i, i] = true;
    m[32, 0] = true;
    int[] indptr;
    uint[] words;
    AttentionDesc.PackTrees(new bool[][,] { null, new bool[,] { { true, true }, { true, true } }, m },
                            out indptr, out words);
    Assert.AreEqual(new int[] { 0, 0, 2, 68 }, indptr);
    Assert.AreEqual(3u, words[0]);
    Assert.AreEqual(3u, words[1]);
    Assert.AreEqual(1u, words[2]);
    Assert.AreEqual(1u << 31, words[2 + 31 * 2]);
    Assert.AreEqual(1u, words[2 + 32 * 2]);
    Assert.AreEqual(1u, words[2 + 32 * 2 + 1]);
    Throws("vkattn: tree mask 0 is 1 x 2, must be square",
           () => AttentionDesc.PackTrees(new bool[][,] { new bool[1, 2] }, out indptr, out words));
  }

  // A varlen call with a draft tree on one sequence (9 tokens over 40 keys)
  // and none on the other equals the same call with the equivalent bool
  // mask. Tree arrays shorter than the call needs throw.
  [Test]
  public void SpeculativeTreesEqualTheirBoolMask() {
    var r = new Random(14);
    int[] cuQ = { 0, 9, 14 }, cuK = { 0, 40, 52 };
    const int tq = 14, tk = 52;
    var trees = new bool[][,] { RandomTree(r, 9), null };
    byte[] mask = TreeBoolMask(trees, cuQ, cuK);
    float[] q = Randoms(r, tq * H * D), k = Randoms(r, tk * Hkv * D), v = Randoms(r, tk * Hkv * D);
    using (var tQ = Tensor.Of(ctx, q, tq, H, D))
    using (var tK = Tensor.Of(ctx, k, tk, Hkv, D))
    using (var tV = Tensor.Of(ctx, v, tk, Hkv, D))
    using (var tM = new Tensor(ctx, Dtype.U8, mask.Length))
    using (var tGot = new Tensor(ctx, Dtype.F32, tq, H, D))
    using (var tWant = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      tM.Write(mask);
      foreach (bool causal in new[] { true, false }) {
        var d = Desc(causal, -1);
        d.SetTrees(trees);
        ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tV, tGot);
        var m = Desc(causal, -1);
        m.Mask = tM;
        m.MaskType = (uint)global::Vkattn.MaskType.MASK_BOOL;
        ctx.AttentionVarlen(m, cuQ, cuK, tQ, tK, tV, tWant);
        Assert.Less(MaxDiff(tWant.ToFloatArray(), tGot.ToFloatArray()), 1e-5, "causal " + causal);
      }

      int[] indptr;
      uint[] words;
      AttentionDesc.PackTrees(trees, out indptr, out words);
      var shortArrays = Desc(true, -1);
      shortArrays.SetTrees(new int[] { 0, 9 }, words);
      var e = Assert.Throws<VkattnException>(
          () => ctx.AttentionVarlen(shortArrays, cuQ, cuK, tQ, tK, tV, tGot));
      StringAssert.Contains("tree_indptr has 2 entries", e.Message);
      var eight = new uint[8];
      Array.Copy(words, eight, 8);
      shortArrays.SetTrees(indptr, eight);
      e = Assert.Throws<VkattnException>(
          () => ctx.AttentionVarlen(shortArrays, cuQ, cuK, tQ, tK, tV, tGot));
      StringAssert.Contains("the tree_mask array holds 8", e.Message);
    }
  }

  // Tree arguments that do not fit throw VkattnException with the reason,
  // never a .NET runtime exception or a tree cut into range: a null
  // PackTrees, empty arrays, prefix sums that are negative, decreasing,
  // 2^31 - 1 or another word count than t * ceil(t / 32). A failed
  // SetTrees keeps the trees set before it (it used to clear them, so the
  // next call ran without its tree).
  [Test]
  public void BadTreeArgumentsThrow() {
    int[] indptr;
    uint[] words;
    // (It used to throw NullReferenceException.)
    Throws("vkattn: PackTrees: masks is null",
           () => AttentionDesc.PackTrees(null, out indptr, out words));
    Throws("vkattn: tree mask 0 is 0 x 2, must be square",
           () => Desc(true, -1).SetTrees(new bool[][,] { new bool[0, 2] }));

    int[] cuQ = { 0, 9, 14 }, cuK = { 0, 40, 52 };
    const int tq = 14, tk = 52;
    AttentionDesc.PackTrees(new bool[][,] { RandomTree(new Random(17), 9), null }, out indptr,
                            out words);
    using (var tQ = new Tensor(ctx, Dtype.F32, tq, H, D))
    using (var tK = new Tensor(ctx, Dtype.F32, tk, Hkv, D))
    using (var tO = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      tQ.Write(new float[tq * H * D]);
      tK.Write(new float[tk * Hkv * D]);
      var d = Desc(true, -1);
      // Empty arrays: no tree_indptr entry at all, or words without tree_indptr.
      Throws("vkattn: tree_indptr needs batch + 1 >= 1 entries (has 0)",
             () => d.SetTrees(new int[0], words));
      Throws("vkattn: tree_mask given without tree_indptr", () => d.SetTrees(null, new uint[0]));
      Throws("vkattn: tree_mask given without tree_indptr", () => d.SetTrees(null, words));
      var bad = new[] {
        new { Indptr = new[] { 0, -9, -9 }, Want = "desc->tree_indptr decreases at 1 (0 -> -9)" },
        new { Indptr = new[] { 0, int.MinValue, 0 },
              Want = "desc->tree_indptr decreases at 1 (0 -> -2147483648)" },
        new { Indptr = new[] { 0, 100, 9 }, Want = "desc->tree_indptr decreases at 2 (100 -> 9)" },
        new { Indptr = new[] { 5, 9, 9 }, Want = "desc->tree_indptr[0] is 5, must be 0" },
        new { Indptr = new[] { 0, int.MaxValue, int.MaxValue },
              Want = "tree_indptr counts 2147483647 words, the tree_mask array holds 9" },
        new { Indptr = new[] { 0, 8, 8 },
              Want = "sequence 0 has 8 words, must be t * ceil(t / 32) = 9 (t = 9)" },
        new { Indptr = new[] { 0, 0, 9 },
              Want = "sequence 1 has 9 words, must be t * ceil(t / 32) = 5 (t = 5)" },
      };
      foreach (var c in bad) {
        var b = Desc(true, -1);
        b.SetTrees(c.Indptr, words);
        var e = Assert.Throws<VkattnException>(
            () => ctx.AttentionVarlen(b, cuQ, cuK, tQ, tK, tK, tO));
        Assert.AreEqual(Status.ERROR_INVALID_ARGUMENT, e.Status);
        StringAssert.Contains(c.Want, e.Message);
      }
      // uint words take every bit pattern: 0xFFFFFFFF sees the whole block.
      var all = new uint[9];
      for (int i = 0; i < all.Length; ++i) all[i] = uint.MaxValue;
      d.SetTrees(indptr, all);
      ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tK, tO);

      d.SetTrees(indptr, words);
      Assert.Throws<VkattnException>(() => d.SetTrees(new int[0], words));
      Assert.Throws<VkattnException>(() => d.SetTrees(null, words));
      // The 3-entry tree_indptr is still set: a call of one sequence says so.
      var kept = Assert.Throws<VkattnException>(
          () => ctx.AttentionVarlen(d, new[] { 0, tq }, new[] { 0, tk }, tQ, tK, tK, tO));
      StringAssert.Contains("tree_indptr has 3 entries, the call needs 2", kept.Message);
      ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tK, tO);
      d.SetTrees((bool[][,])null);  // clears them
      ctx.AttentionVarlen(d, new[] { 0, tq }, new[] { 0, tk }, tQ, tK, tK, tO);
    }
  }

  // Top-k lists, k entries for each query row of a packed batch: row i of
  // sequence b lists distinct random positions 0 .. u_b - 1, the first row
  // only k - 3 of them, then -1 pads. Returns the lists [tq * k] and sets
  // mask (each sequence's t x u block row-major) to 1 exactly where the key
  // is listed.
  static int[] RandomTopk(Random r, int[] cuQ, int[] cuK, int k, byte[] mask) {
    var lists = new int[cuQ[cuQ.Length - 1] * k];
    for (int x = 0; x < lists.Length; ++x) lists[x] = -1;
    int at = 0;
    for (int b = 0; b + 1 < cuQ.Length; ++b) {
      int t = cuQ[b + 1] - cuQ[b], u = cuK[b + 1] - cuK[b];
      for (int i = 0; i < t; ++i, at += u) {
        int row = cuQ[b] + i, n = row == 0 ? k - 3 : k;
        var keys = new int[u];
        for (int j = 0; j < u; ++j) keys[j] = j;
        for (int x = 0; x < n; ++x) { // the first n of a partial shuffle
          int y = x + r.Next(u - x), j = keys[y];
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
  [Test]
  public void TopkListsEqualTheirBoolMask() {
    var r = new Random(16);
    int[] cuQ = { 0, 3, 4 }, cuK = { 0, 40, 65 };
    const int tq = 4, tk = 65, kk = 8;
    var mask = new byte[3 * 40 + 1 * 25]; // sum of t_b * u_b
    int[] lists = RandomTopk(r, cuQ, cuK, kk, mask);
    float[] q = Randoms(r, tq * H * D), k = Randoms(r, tk * Hkv * D), v = Randoms(r, tk * Hkv * D);
    using (var tQ = Tensor.Of(ctx, q, tq, H, D))
    using (var tK = Tensor.Of(ctx, k, tk, Hkv, D))
    using (var tV = Tensor.Of(ctx, v, tk, Hkv, D))
    using (var tM = new Tensor(ctx, Dtype.U8, mask.Length))
    using (var tTopk = new Tensor(ctx, Dtype.I32, tq, kk))
    using (var tGot = new Tensor(ctx, Dtype.F32, tq, H, D))
    using (var tWant = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      tM.Write(mask);
      tTopk.Write(lists);
      foreach (bool causal in new[] { true, false }) {
        var d = Desc(causal, -1);
        d.TopkIndices = tTopk;
        Assert.AreSame(tTopk, d.TopkIndices);
        ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tV, tGot);
        var m = Desc(causal, -1);
        m.Mask = tM;
        m.MaskType = (uint)global::Vkattn.MaskType.MASK_BOOL;
        ctx.AttentionVarlen(m, cuQ, cuK, tQ, tK, tV, tWant);
        Assert.Less(MaxDiff(tWant.ToFloatArray(), tGot.ToFloatArray()), 1e-5, "causal " + causal);
      }
    }
  }

  // Top-k tensors that do not fit the call throw VkattnException naming the
  // problem: another dtype, another context, a rank other than 2 or 3, a
  // first dim other than the query tokens, a middle dim other than Hkv; a
  // Tensor disposed before or after it was stored (the native desc would
  // keep a dangling pointer), also for SelfCheck and a cache step.
  [Test]
  public void BadTopkListsThrow() {
    int[] cuQ = { 0, 3, 4 }, cuK = { 0, 40, 65 };
    const int tq = 4, tk = 65, kk = 8;
    var r = new Random(18);
    using (var other = new Context())
    using (var tQ = Tensor.Of(ctx, Randoms(r, tq * H * D), tq, H, D))
    // (Random keys: a listed key would give a row other than 0.)
    using (var tK = Tensor.Of(ctx, Randoms(r, tk * Hkv * D), tk, Hkv, D))
    using (var tO = new Tensor(ctx, Dtype.F32, tq, H, D)) {
      var bad = new[] {
        new { T = new Tensor(ctx, Dtype.F32, tq, kk), Want = "desc->topk_indices must be i32, got f32" },
        new { T = new Tensor(ctx, Dtype.U8, tq, kk), Want = "desc->topk_indices must be i32, got u8" },
        new { T = new Tensor(other, Dtype.I32, tq, kk),
              Want = "desc->topk_indices belongs to another context" },
        new { T = new Tensor(ctx, Dtype.I32, tq * kk),
              Want = "must be [rows, K] or [rows, Hkv, K], got [32]" },
        new { T = new Tensor(ctx, Dtype.I32, tq, Hkv, 1, kk), Want = "got [4, 2, 1, 8]" },
        new { T = new Tensor(ctx, Dtype.I32, tq + 1, kk),
              Want = "desc->topk_indices' first dim is 5, must be the call's query tokens 4" },
        new { T = new Tensor(ctx, Dtype.I32, tq - 1, Hkv, kk), Want = "desc->topk_indices' first dim is 3" },
        new { T = new Tensor(ctx, Dtype.I32, tq, Hkv + 1, kk),
              Want = "desc->topk_indices' middle dim is 3, must be num_kv_heads 2" },
        new { T = new Tensor(ctx, Dtype.I32, tq, H, kk),
              Want = "desc->topk_indices' middle dim is 4, must be num_kv_heads 2" },
      };
      foreach (var c in bad) {
        using (c.T) {
          var d = Desc(true, -1);
          d.TopkIndices = c.T;
          var e = Assert.Throws<VkattnException>(
              () => ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tK, tO));
          Assert.AreEqual(Status.ERROR_INVALID_ARGUMENT, e.Status);
          StringAssert.Contains(c.Want, e.Message);
        }
      }
      // K = 0 (every row empty) and lists of out-of-range positions (all
      // skipped) are valid lists: the rows come out 0.
      var far = new int[tq * kk];
      for (int i = 0; i < far.Length; ++i) far[i] = i % 2 == 0 ? int.MinValue : int.MaxValue;
      foreach (var shape in new[] { new long[] { tq, 0 }, new long[] { tq, Hkv, 0 },
                                    new long[] { tq, kk } }) {
        using (var t = new Tensor(ctx, Dtype.I32, shape)) {
          if (shape[shape.Length - 1] > 0) t.Write(far);
          var d = Desc(true, -1);
          d.TopkIndices = t;
          ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tK, tO);
          Assert.AreEqual(0.0, MaxDiff(new float[tq * H * D], tO.ToFloatArray()));
        }
      }

      var disposed = new Tensor(ctx, Dtype.I32, tq, kk);
      disposed.Dispose();
      var before = Desc(true, -1);
      before.TopkIndices = disposed;  // disposed, then stored
      Throws("vkattn: AttentionDesc.TopkIndices: this Tensor is disposed",
             () => ctx.AttentionVarlen(before, cuQ, cuK, tQ, tK, tK, tO));
      var tt = new Tensor(ctx, Dtype.I32, tq, kk);
      var after = Desc(true, -1);
      after.TopkIndices = tt;
      tt.Dispose();  // stored, then disposed
      Throws("vkattn: AttentionDesc.TopkIndices: this Tensor is disposed",
             () => ctx.AttentionVarlen(after, cuQ, cuK, tQ, tK, tK, tO));
      Throws("vkattn: AttentionDesc.TopkIndices: this Tensor is disposed",
             () => ctx.SelfCheck(after, (int)Dtype.F32, (int)Dtype.F32, 0, 1));
      var cd = new KvCacheDesc { NumLayers = 1, NumKvHeads = Hkv, HeadDim = D, PageSize = 16,
                                 NumPages = 4, Dtype = Dtype.F32 };
      using (var cache = new KvCache(ctx, cd))
      using (var step = cache.Begin(new long[] { 1 }, new[] { 1 }))
      using (var k1 = Tensor.Of(ctx, new float[Hkv * D], 1, Hkv, D))
      using (var q1 = Tensor.Of(ctx, new float[H * D], 1, H, D))
      using (var o1 = new Tensor(ctx, Dtype.F32, 1, H, D)) {
        step.Append(0, k1, k1);
        Throws("vkattn: AttentionDesc.TopkIndices: this Tensor is disposed",
               () => step.Attention(0, after, q1, o1));
      }
      after.TopkIndices = null;  // cleared: the call runs
      ctx.AttentionVarlen(after, cuQ, cuK, tQ, tK, tK, tO);
    }
  }

  // A reference result joined with per-head sinks: lse' = logaddexp(lse,
  // sink), out' = out * exp(lse - lse').
  static float[][] WithSinks(float[][] reference, float[] sinks, int h, int dv) {
    float[] out_ = (float[])reference[0].Clone(), lse = (float[])reference[1].Clone();
    for (int row = 0; row < lse.Length; ++row) {
      double l = reference[1][row], s = sinks[row % h], m = Math.Max(l, s);
      double j = m + Math.Log(Math.Exp(l - m) + Math.Exp(s - m));
      lse[row] = (float)j;
      for (int e = 0; e < dv; ++e) out_[row * dv + e] = (float)(reference[0][row * dv + e] * Math.Exp(l - j));
    }
    return new[] { out_, lse };
  }

  [Test]
  public void SinksJoinTheDenominator() {
    var r = new Random(5);
    int[] cuQ = { 0, 3, 5, 6 }, cuK = { 0, 7, 9, 13 };
    const int tq = 6, tk = 13;
    float[] q = Randoms(r, tq * H * D), k = Randoms(r, tk * Hkv * D), v = Randoms(r, tk * Hkv * D);
    var sinks = new float[H];
    for (int h = 0; h < H; ++h) sinks[h] = 0.5f * h - 1f;
    var reference = WithSinks(Reference(q, k, v, cuQ, cuK, H, Hkv, D, true, -1), sinks, H, D);
    using (var tQ = Tensor.Of(ctx, q, tq, H, D))
    using (var tK = Tensor.Of(ctx, k, tk, Hkv, D))
    using (var tV = Tensor.Of(ctx, v, tk, Hkv, D))
    using (var tS = Tensor.Of(ctx, sinks, H))
    using (var tO = new Tensor(ctx, Dtype.F32, tq, H, D))
    using (var tL = new Tensor(ctx, Dtype.F32, tq, H)) {
      var d = Desc(true, -1);
      d.Lse = tL;
      d.Sinks = tS;
      ctx.AttentionVarlen(d, cuQ, cuK, tQ, tK, tV, tO);
      Assert.Less(MaxDiff(reference[0], tO.ToFloatArray()), 1e-5);
      Assert.Less(MaxDiff(reference[1], tL.ToFloatArray()), 1e-5);
    }
  }

  // bf16 bits of values that bf16 holds exactly are the top half of the f32 bits.
  static ushort ToBf16(float f) { return (ushort)(BitConverter.ToUInt32(BitConverter.GetBytes(f), 0) >> 16); }
  static float FromBf16(ushort b) { return BitConverter.ToSingle(BitConverter.GetBytes((uint)b << 16), 0); }

  [Test]
  public void Bf16ThroughUShortArrays() {
    var r = new Random(2);
    int[] cuQ = { 0, 2 }, cuK = { 0, 5 };
    Func<int, float[]> exact = n => {
      var a = new float[n];
      for (int i = 0; i < n; ++i) a[i] = (r.Next(256) - 128) / 256f;
      return a;
    };
    float[] q = exact(2 * H * D), k = exact(5 * Hkv * D), v = exact(5 * Hkv * D);
    Func<float[], ushort[]> bits = a => Array.ConvertAll(a, ToBf16);
    var reference = Reference(q, k, v, cuQ, cuK, H, Hkv, D, true, -1);
    using (var tQ = Tensor.Of(ctx, Dtype.BF16, bits(q), 2, H, D))
    using (var tK = Tensor.Of(ctx, Dtype.BF16, bits(k), 5, Hkv, D))
    using (var tV = Tensor.Of(ctx, Dtype.BF16, bits(v), 5, Hkv, D))
    using (var tO = new Tensor(ctx, Dtype.BF16, 2, H, D)) {
      ctx.AttentionVarlen(Desc(true, -1), cuQ, cuK, tQ, tK, tV, tO);
      Assert.Less(MaxDiff(reference[0], Array.ConvertAll(tO.ToUShortArray(), FromBf16)), 8e-3);
    }
  }

  [Test]
  public void MergeOfTwoKeyHalvesEqualsFullAttention() {
    var r = new Random(3);
    const int n = 3, u = 6, half = u / 2 * Hkv * D;
    float[] q = Randoms(r, n * H * D), k = Randoms(r, u * Hkv * D), v = Randoms(r, u * Hkv * D);
    var full = Reference(q, k, v, new[] { 0, n }, new[] { 0, u }, H, Hkv, D, false, -1);
    Func<float[], int, float[]> part = (a, i) => { var p = new float[half]; Array.Copy(a, i * half, p, 0, half); return p; };
    using (var tQ = Tensor.Of(ctx, q, n, H, D))
    using (var k1 = Tensor.Of(ctx, part(k, 0), u / 2, Hkv, D))
    using (var v1 = Tensor.Of(ctx, part(v, 0), u / 2, Hkv, D))
    using (var k2 = Tensor.Of(ctx, part(k, 1), u / 2, Hkv, D))
    using (var v2 = Tensor.Of(ctx, part(v, 1), u / 2, Hkv, D))
    using (var o1 = new Tensor(ctx, Dtype.F32, n, H, D))
    using (var o2 = new Tensor(ctx, Dtype.F32, n, H, D))
    using (var l1 = new Tensor(ctx, Dtype.F32, n, H))
    using (var l2 = new Tensor(ctx, Dtype.F32, n, H)) {
      int[] cuQ = { 0, n }, cuK = { 0, u / 2 };
      var d = Desc(false, -1);
      d.Lse = l1;
      ctx.AttentionVarlen(d, cuQ, cuK, tQ, k1, v1, o1);
      d.Lse = l2;
      ctx.AttentionVarlen(d, cuQ, cuK, tQ, k2, v2, o2);
      ctx.AttentionMerge(o1, l1, o2, l2, o1, l1);
      Assert.Less(MaxDiff(full[0], o1.ToFloatArray()), 1e-5);
      Assert.Less(MaxDiff(full[1], l1.ToFloatArray()), 1e-5);
    }
  }

  [Test]
  public void GettersAndDevices() {
    using (var t = new Tensor(ctx, Dtype.F16, 5, 0, 3)) {
      Assert.AreEqual(Dtype.F16, t.Dtype());
      CollectionAssert.AreEqual(new long[] { 5, 0, 3 }, t.Shape);
      Assert.AreEqual(0, t.Nbytes());
      Assert.AreEqual(0, t.ToUShortArray().Length);
    }
    Assert.AreEqual(Library.VERSION_MAJOR * 10000 + Library.VERSION_MINOR * 100 + Library.VERSION_PATCH,
                    Library.Version());
    // The assembly's version is the release the header and library say.
    var asm = typeof(Library).Assembly.GetName().Version;
    Assert.AreEqual(new System.Version(Library.VERSION_MAJOR, Library.VERSION_MINOR, Library.VERSION_PATCH, 0),
                    asm);
    Assert.AreEqual(Library.VERSION_STRING, asm.ToString(3));
    Assert.AreEqual(2, Library.DtypeSize(Dtype.F16));
    var info = ctx.DeviceInfo();
    Assert.IsNotEmpty(info.Name);
    Assert.Greater(info.MaxBufferRange, 0);
    bool found = false;
    for (long i = 0; i < Library.DeviceCount(); ++i) found |= Library.GetDeviceInfo(i).Name == info.Name;
    Assert.IsTrue(found);
    Throws("vkattn_device_get_info: ", () => Library.GetDeviceInfo(Library.DeviceCount()));
    Assert.AreEqual("invalid argument", Library.StatusString(Status.ERROR_INVALID_ARGUMENT));
  }

  // ---- a disposed Tensor stored in a desc throws, naming the field ----

  [Test]
  public void DisposedTensorInTheDescThrows() {
    int[] cu = { 0, 2 };
    using (var q = new Tensor(ctx, Dtype.F32, 2, H, D))
    using (var kv = new Tensor(ctx, Dtype.F32, 2, Hkv, D))
    using (var o = new Tensor(ctx, Dtype.F32, 2, H, D)) {
      q.Write(new float[2 * H * D]);
      kv.Write(new float[2 * Hkv * D]);
      foreach (var f in new[] { "Lse", "Sinks", "AlibiSlopes" }) {
        var d = Desc(true, -1);
        var t = f == "Lse" ? new Tensor(ctx, Dtype.F32, 2, H) : new Tensor(ctx, Dtype.F32, H);
        if (f == "Lse") d.Lse = t;
        if (f == "Sinks") d.Sinks = t;
        if (f == "AlibiSlopes") d.AlibiSlopes = t;
        t.Dispose();  // stored, then disposed: the desc must not pass it on
        var e = Assert.Throws<VkattnException>(() => ctx.AttentionVarlen(d, cu, cu, q, kv, kv, o));
        Assert.AreEqual(Status.ERROR_INVALID_ARGUMENT, e.Status);
        Assert.AreEqual("vkattn: AttentionDesc." + f + ": this Tensor is disposed", e.Message);
      }
      ctx.AttentionVarlen(Desc(true, -1), cu, cu, q, kv, kv, o);  // the context is still fine
    }
  }

  // ---- errors carry the C message ----

  [Test]
  public void BadInputThrowsWithTheLibraryMessage() {
    using (var t = new Tensor(ctx, Dtype.F32, 2, 3)) {
      var e = Assert.Throws<VkattnException>(() => t.Write(new float[5]));
      Assert.AreEqual(Status.ERROR_INVALID_ARGUMENT, e.Status);
      Assert.AreEqual("vkattn_tensor_write: nbytes 20 != tensor size 24", e.Message);
      Throws("vkattn_tensor_read: nbytes 28", () => t.Read(new float[7]));
      Throws("vkattn: a 16-bit array does not fit a f32 tensor", () => t.Write(new ushort[6]));
    }
    Throws("vkattn_tensor_create: ", () => new Tensor(ctx, Dtype.F32, 1, 2, 3, 4, 5));
    Throws("vkattn_context_create: ", () => new Context(1000, 0));
    using (var q = new Tensor(ctx, Dtype.F32, 2, H, D)) {
      var d = Desc(false, -1);
      d.HeadDim = 0;
      Throws("vkattn_attention_varlen: ", () => ctx.AttentionVarlen(d, new[] { 0, 2 }, new[] { 0, 2 }, q, q, q, q));
      Throws("vkattn: cu_seqlens_k has 1 entries",
             () => ctx.AttentionVarlen(Desc(false, -1), new[] { 0, 2 }, new[] { 0 }, q, q, q, q));
    }
  }

  // Arguments whose C# type is wider than the C one (longs for uint32_t,
  // an int for a 0/1 flag) or an enum value the header does not name: a
  // clear exception, never a value cut to 32 bits or read as another.
  [Test]
  public void ArgumentsThatDoNotFitTheCTypeThrow() {
    Throws("vkattn: flags -1 out of range", () => new Context(-1, -1L));
    Throws("vkattn: flags 4294967296 out of range", () => new Context(-1, 1L << 32));
    var d = Desc(false, -1);
    Throws("vkattn: paged must be 0 or 1, got 2",
           () => ctx.SelfCheck(d, (int)Dtype.F32, (int)Dtype.F32, 2, 1));
    Throws("vkattn: query_tokens must be 1 .. 2^24, got 4294967297",
           () => ctx.SelfCheck(d, (int)Dtype.F32, (int)Dtype.F32, 0, (1L << 32) + 1));
    Throws("vkattn_tensor_create: ", () => new Tensor(ctx, (Dtype)99, 2));
    var kd = new KvCacheDesc();
    kd.NumLayers = 1;
    kd.NumKvHeads = 1;
    kd.HeadDim = 8;
    kd.NumPages = 2;
    kd.Dtype = (Dtype)99;
    Throws("vkattn_kv_cache_create: ", () => new KvCache(ctx, kd));
  }

  // ---- misuse fails cleanly ----

  [Test]
  public void DisposeTwiceAndUseAfterDispose() {
    var c = new Context();
    var live = Tensor.Of(c, new float[] { 1, 2, 3 }, 3);
    c.Dispose();
    c.Dispose();
    Assert.IsFalse(c.IsOpen);
    Throws("vkattn: this Context is closed", () => c.Synchronize());
    Throws("vkattn_tensor_create: ", () => new Tensor(c, Dtype.F32, 1));
    // Objects keep their context alive.
    CollectionAssert.AreEqual(new float[] { 1, 2, 3 }, live.ToFloatArray());
    live.Dispose();
    live.Dispose();
    Throws("vkattn: this Tensor is closed", () => live.Write(new float[3]));
    Throws("vkattn: this Tensor is closed", () => live.ToFloatArray());
    Throws("vkattn: this Tensor is closed", () => live.Dtype());
    // Plain structs can be disposed explicitly; their fields then throw.
    var d = Desc(true, -1);
    d.Dispose();
    d.Dispose();
    Throws("vkattn: this AttentionDesc was deleted", () => d.NumHeads = 1);
    var info = ctx.DeviceInfo();
    info.Dispose();
    Throws("vkattn: this DeviceInfo was deleted", () => { var n = info.Name; });
  }

  [Test]
  public void NullArgumentsThrow() {
    using (var t = new Tensor(ctx, Dtype.F32, 2, H, D)) {
      Throws("vkattn: the float array is null", () => t.Write((float[])null));
      Throws("vkattn: the int array is null", () => t.Read((int[])null));
      Throws("vkattn_tensor_create: ", () => new Tensor(null, Dtype.F32, 1));
      Throws("vkattn: the shape array is null", () => new Tensor(ctx, Dtype.F32, (long[])null));
      Throws("vkattn_attention_varlen: ", () => ctx.AttentionVarlen(null, new[] { 0, 2 }, new[] { 0, 2 }, t, t, t, t));
      Throws("vkattn: cu_seqlens_q is null", () => ctx.AttentionVarlen(Desc(false, -1), null, null, t, t, t, t));
      Throws("vkattn_attention_merge: ", () => ctx.AttentionMerge(null, null, null, null, null, null));
      var closed = new Tensor(ctx, Dtype.F32, 2, H, D);
      closed.Dispose();
      Throws("vkattn_attention_varlen: ",
             () => ctx.AttentionVarlen(Desc(false, -1), new[] { 0, 2 }, new[] { 0, 2 }, closed, t, t, t));
    }
  }

  // ---- paged KV cache ----

  static KvCacheDesc CacheDesc(uint layers, uint pages) {
    var d = new KvCacheDesc();
    d.NumLayers = layers;
    d.NumKvHeads = Hkv;
    d.HeadDim = D;
    d.PageSize = 4;
    d.NumPages = pages;
    d.Dtype = Dtype.F32;
    return d;
  }

  static float[] Slice(float[] a, int from, int to) {
    var s = new float[to - from];
    Array.Copy(a, from, s, 0, s.Length);
    return s;
  }

  [Test]
  public void KvCacheAppendCommitReadForkTruncate() {
    var r = new Random(5);
    const int row = Hkv * D;
    using (var cache = new KvCache(ctx, CacheDesc(2, 8))) {
      Assert.AreEqual(8, cache.NumFreePages());
      float[][] k = { Randoms(r, 8 * row), Randoms(r, 8 * row) };
      float[][] v = { Randoms(r, 8 * row), Randoms(r, 8 * row) };
      using (var step = cache.Begin(new long[] { 7, 9 }, new[] { 5, 3 })) {
        for (int l = 0; l < 2; ++l)
          using (var tk = Tensor.Of(ctx, k[l], 8, Hkv, D))
          using (var tv = Tensor.Of(ctx, v[l], 8, Hkv, D))
            step.Append(l, tk, tv);
        step.Commit();
        Assert.IsFalse(step.IsActive());
        Throws("vkattn: this Step is already committed or aborted", () => step.Commit());
      }
      Assert.AreEqual(5, cache.Length(7));
      Assert.AreEqual(3, cache.Length(9));
      Assert.AreEqual(0, cache.Length(1));
      Assert.AreEqual(8 - 2 - 1, cache.NumFreePages());
      float[] kOut = new float[3 * row], vOut = new float[3 * row];
      cache.Read(1, 9, 0, 3, kOut, vOut);
      CollectionAssert.AreEqual(Slice(k[1], 5 * row, 8 * row), kOut);
      CollectionAssert.AreEqual(Slice(v[1], 5 * row, 8 * row), vOut);
      cache.Fork(7, 8);
      cache.Truncate(8, 2);
      Assert.AreEqual(2, cache.Length(8));
      cache.Remove(8);
      Assert.AreEqual(0, cache.Length(8));
      using (var s = cache.Begin(new long[] { 7, 10 }, new[] { 1, 2 })) Assert.IsTrue(s.IsActive());
      Assert.AreEqual(5, cache.Length(7));
      Assert.AreEqual(8 - 2 - 1, cache.NumFreePages());
    }
  }

  [Test]
  public void KvCacheErrorsAndMisuse() {
    using (var cache = new KvCache(ctx, CacheDesc(1, 2))) {
      Throws("vkattn_kv_cache_remove: ", () => cache.Remove(42));
      var e = Assert.Throws<VkattnException>(() => cache.Begin(new long[] { 1 }, new[] { 100 }));
      Assert.AreEqual(Status.ERROR_CACHE_FULL, e.Status);
      StringAssert.StartsWith("vkattn_step_begin: ", e.Message);
      Throws("vkattn: 2 sequence ids but 1 token counts", () => cache.Begin(new long[] { 1, 2 }, new[] { 1 }));
      Throws("vkattn: the seqIds array is null", () => cache.Begin(null, new[] { 1 }));
      Throws("vkattn: a 16-bit array does not fit a f32 cache", () => cache.Read(0, 1, 0, 0, new ushort[0], new ushort[0]));
      var s = cache.Begin(new long[] { 1 }, new[] { 1 });
      Throws("vkattn_kv_cache_fork: ", () => cache.Fork(1, 2));
      Throws("vkattn_step_append: ", () => s.Append(0, null, null));
      s.Abort();
      s.Abort();
      Throws("vkattn: this Step is already committed or aborted", () => s.Append(0, null, null));
      s.Dispose();
      s.Dispose();
      Throws("vkattn: this Step is closed", () => s.Commit());
      Throws("vkattn_kv_cache_create: ", () => new KvCache(ctx, null));
    }
    var closed = new KvCache(ctx, CacheDesc(1, 1));
    var open = closed.Begin(new long[] { 3 }, new[] { 2 });
    closed.Dispose();
    closed.Dispose();
    Throws("vkattn: this KvCache is closed", () => closed.Length(1));
    open.Dispose();
  }
}
