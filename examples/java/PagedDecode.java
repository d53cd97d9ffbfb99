// The same small program in Java, C# and Go: a context, a paged KV cache,
// a 40-token prompt prefilled in two chunks, 4 decoded tokens, then the
// norm of the last output and the device name. Inputs come from one LCG,
// so the three programs print the same numbers.
//
//   java -cp build/bindings/java/vkattn.jar examples/java/PagedDecode.java
import org.vkattn.AttentionDesc;
import org.vkattn.Context;
import org.vkattn.Dtype;
import org.vkattn.KvCache;
import org.vkattn.KvCacheDesc;
import org.vkattn.Step;
import org.vkattn.Tensor;

public class PagedDecode {
  static final int LAYERS = 2, H = 4, HKV = 2, D = 16;
  static long state = 1;

  static float[] next(int n) {
    float[] a = new float[n];
    for (int i = 0; i < n; ++i) {
      state = state * 6364136223846793005L + 1442695040888963407L;
      a[i] = (state >>> 40) / 16777216f - 0.5f;
    }
    return a;
  }

  // One step of `tokens` new tokens of sequence 1 through every layer;
  // returns the last layer's output.
  static float[] step(Context ctx, KvCache cache, AttentionDesc desc, int tokens) {
    float[] out = null;
    try (Step step = cache.begin(new long[] {1}, new int[] {tokens})) {
      for (int layer = 0; layer < LAYERS; ++layer) {
        try (Tensor k = Tensor.of(ctx, next(tokens * HKV * D), tokens, HKV, D);
            Tensor v = Tensor.of(ctx, next(tokens * HKV * D), tokens, HKV, D);
            Tensor q = Tensor.of(ctx, next(tokens * H * D), tokens, H, D);
            Tensor o = new Tensor(ctx, Dtype.F32, tokens, H, D)) {
          step.append(layer, k, v);
          step.attention(layer, desc, q, o);
          out = o.toFloatArray();
        }
      }
      step.commit();
    }
    return out;
  }

  public static void main(String[] args) {
    try (Context ctx = new Context()) {
      KvCacheDesc cd = new KvCacheDesc(); // f16 pages of 16 tokens by default
      cd.setNumLayers(LAYERS);
      cd.setNumKvHeads(HKV);
      cd.setHeadDim(D);
      cd.setNumPages(8);
      AttentionDesc desc = new AttentionDesc();
      desc.setNumHeads(H);
      desc.setNumKvHeads(HKV);
      desc.setHeadDim(D);
      desc.setCausal(1);
      try (KvCache cache = new KvCache(ctx, cd)) {
        step(ctx, cache, desc, 24); // prompt, first chunk
        step(ctx, cache, desc, 16); // prompt, second chunk
        float[] out = null;
        for (int i = 0; i < 4; ++i) out = step(ctx, cache, desc, 1); // decode
        double norm = 0;
        for (float x : out) norm += (double) x * x;
        System.out.printf("device: %s%n", ctx.deviceInfo().getName());
        System.out.printf("sequence 1: %d tokens in the cache, %d free pages%n", cache.length(1),
            cache.numFreePages());
        System.out.printf("last output norm: %.6f%n", Math.sqrt(norm));
        if (!(norm > 0) || Double.isInfinite(norm)) System.exit(1);
      }
    }
  }
}
