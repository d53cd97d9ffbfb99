import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertThrows;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.Test;
import org.vkattn.AttentionDesc;
import org.vkattn.Context;
import org.vkattn.Dtype;
import org.vkattn.KvCache;
import org.vkattn.KvCacheDesc;
import org.vkattn.Step;
import org.vkattn.Tensor;
import org.vkattn.VkattnException;

/** Step attention over the paged cache: chunked prefill and decode of two
 * sequences, compared with plain attention over each sequence's history. */
public class VkattnStepTest {
  static final int H = VkattnTest.H, HKV = VkattnTest.HKV, D = VkattnTest.D, ROW = HKV * D;

  @Test
  public void chunkedPrefillAndDecodeMatchReference() {
    Random r = new Random(6);
    long[] ids = {11, 22};
    int[][] steps = {{3, 4}, {2, 1}, {1, 1}}; // new tokens per sequence and step
    List<List<float[]>> hk = new ArrayList<>(), hv = new ArrayList<>(); // [layer][seq]: history
    for (int l = 0; l < 2; ++l) {
      hk.add(new ArrayList<>(List.of(new float[0], new float[0])));
      hv.add(new ArrayList<>(List.of(new float[0], new float[0])));
    }
    try (Context ctx = new Context(); KvCache cache = new KvCache(ctx, cacheDesc())) {
      AttentionDesc d = new AttentionDesc();
      d.setNumHeads(H);
      d.setNumKvHeads(HKV);
      d.setHeadDim(D);
      d.setCausal(1);
      for (int[] counts : steps) {
        int total = counts[0] + counts[1];
        try (Step step = cache.begin(ids, counts)) {
          for (int l = 0; l < 2; ++l) {
            float[] k = VkattnTest.random(r, total * ROW), v = VkattnTest.random(r, total * ROW);
            float[] q = VkattnTest.random(r, total * H * D);
            // Host history and the packed reference inputs of this step.
            int[] cuQ = new int[3], cuK = new int[3];
            for (int s = 0, off = 0; s < 2; off += counts[s], ++s) {
              hk.get(l).set(s, concat(hk.get(l).get(s), k, off * ROW, counts[s] * ROW));
              hv.get(l).set(s, concat(hv.get(l).get(s), v, off * ROW, counts[s] * ROW));
              cuQ[s + 1] = cuQ[s] + counts[s];
              cuK[s + 1] = cuK[s] + hk.get(l).get(s).length / ROW;
            }
            float[] refK = concat(hk.get(l).get(0), hk.get(l).get(1), 0, hk.get(l).get(1).length);
            float[] refV = concat(hv.get(l).get(0), hv.get(l).get(1), 0, hv.get(l).get(1).length);
            float[][] ref = VkattnTest.reference(q, refK, refV, cuQ, cuK, H, HKV, D, D, true, -1);
            try (Tensor tk = Tensor.of(ctx, k, total, HKV, D);
                Tensor tv = Tensor.of(ctx, v, total, HKV, D);
                Tensor tq = Tensor.of(ctx, q, total, H, D);
                Tensor out = new Tensor(ctx, Dtype.F32, total, H, D)) {
              step.append(l, tk, tv);
              step.attention(l, d, tq, out);
              assertTrue("layer " + l, VkattnTest.maxDiff(ref[0], out.toFloatArray()) < 1e-5f);
            }
          }
          step.commit();
        }
      }
      assertEquals(6, cache.length(11));
      assertEquals(6, cache.length(22));
      // Attention needs this layer appended first, and a live step.
      try (Step step = cache.begin(new long[] {11}, new int[] {1});
          Tensor q = new Tensor(ctx, Dtype.F32, 1, H, D)) {
        VkattnException e = assertThrows(VkattnException.class, () -> step.attention(0, d, q, null));
        assertTrue(e.getMessage(), e.getMessage().startsWith("vkattn_step_attention: "));
        step.abort();
        e = assertThrows(VkattnException.class, () -> step.attention(0, d, q, q));
        assertEquals("vkattn: this Step is already committed or aborted", e.getMessage());
      }
    }
  }

  static KvCacheDesc cacheDesc() {
    KvCacheDesc c = new KvCacheDesc();
    c.setNumLayers(2);
    c.setNumKvHeads(HKV);
    c.setHeadDim(D);
    c.setPageSize(4);
    c.setNumPages(8);
    c.setDtype(Dtype.F32);
    return c;
  }

  static float[] concat(float[] a, float[] b, int from, int n) {
    float[] c = java.util.Arrays.copyOf(a, a.length + n);
    System.arraycopy(b, from, c, a.length, n);
    return c;
  }
}
