/* vkattn_kv.i: the paged KV cache (KvCache) and its steps (Step), included
 * by vkattn.i after the handle classes.
 *
 * Both are small wrapper-owned boxes around the C handles: the KvCache box
 * remembers the cache dtype (so typed reads can refuse a wrong array type,
 * which the byte count alone would not catch), and the Step box forgets its
 * vkattn_step once commit or abort has freed it, so a finished step fails
 * cleanly instead of touching freed memory. */

%{
typedef struct vkattnx_kv_cache {
  vkattn_kv_cache* cache;
  vkattn_dtype dtype;
  uint32_t num_kv_heads; /* readScales checks its arrays against it */
} vkattnx_kv_cache;

typedef struct vkattnx_step {
  vkattn_step* step; /* NULL once committed or aborted */
  int64_t batch;     /* its sequences (AttentionDesc spans and trees are checked against it) */
} vkattnx_step;

#define VKATTNX_CACHE(self, ret)                       \
  do {                                                 \
    if (!(self) || !(self)->cache) {                   \
      vkattnx_fail("vkattn: this KvCache is closed");  \
      return ret;                                      \
    }                                                  \
  } while (0)

#define VKATTNX_STEP(self, ret)                                                        \
  do {                                                                                 \
    if (!(self)) {                                                                     \
      vkattnx_fail("vkattn: this Step is closed");                                     \
      return ret;                                                                      \
    }                                                                                  \
    if (!(self)->step) {                                                               \
      vkattnx_fail("vkattn: this Step is already committed or aborted");               \
      return ret;                                                                      \
    }                                                                                  \
  } while (0)

static void vkattnx_cache_read(vkattnx_kv_cache* self, int32_t layer, int64_t seq_id,
                               int32_t start, int32_t count, void* k, int64_t k_count,
                               void* v, int64_t v_count, size_t elem, int ok_dtype,
                               const char* array_kind) {
  VKATTNX_CACHE(self, );
  if (!k || !v) {
    vkattnx_fail("vkattn: the %s array for %s is null", array_kind, k ? "v" : "k");
    return;
  }
  if (!ok_dtype) {
    vkattnx_fail("vkattn: a %s array does not fit a %s cache", array_kind,
                 vkattnx_dtype_name(self->dtype));
    return;
  }
  vkattnx_ok(vkattn_kv_cache_read(self->cache, (uint32_t)layer, seq_id, start, count, k,
                                  (size_t)k_count * elem, v, (size_t)v_count * elem));
}
%}

%rename(KvCache) vkattnx_kv_cache;
%rename(Step) vkattnx_step;
%nodefaultctor vkattnx_kv_cache;
%nodefaultctor vkattnx_step;
%newobject vkattnx_kv_cache::m_begin;

%apply (const int64_t* IN_I64, int64_t IN_LEN) { (const int64_t* seqIds, int64_t numSeqs) };
%apply (const int32_t* IN_I32, int64_t IN_LEN) { (const int32_t* numNewTokens, int64_t numCounts) };
%apply (float* OUT_F32, int64_t OUT_LEN) {
  (float* kDst, int64_t kCount), (float* vDst, int64_t vCount)
};
%apply (uint16_t* OUT_U16, int64_t OUT_LEN) {
  (uint16_t* kDst, int64_t kCount), (uint16_t* vDst, int64_t vCount)
};
%apply (uint8_t* OUT_U8, int64_t OUT_LEN) {
  (uint8_t* kDst, int64_t kCount), (uint8_t* vDst, int64_t vCount)
};
%apply (const float* IN_F32, int64_t IN_LEN) {
  (const float* kScales, int64_t kCount), (const float* vScales, int64_t vCount)
};

struct vkattnx_kv_cache {};
struct vkattnx_step {};

%extend vkattn_kv_cache_desc {
  /* Defaults of vkattn_kv_cache_desc_init: page size 16, f16; the layer,
   * head and page counts and the head dim must be set. */
  vkattn_kv_cache_desc() {
    vkattn_kv_cache_desc* d = (vkattn_kv_cache_desc*)calloc(1, sizeof *d);
    if (!d) {
      vkattnx_fail("vkattn: out of host memory");
      return NULL;
    }
    vkattn_kv_cache_desc_init(d);
    return d;
  }
  ~vkattn_kv_cache_desc() { free(self); }
}

%extend vkattnx_kv_cache {
  /* Allocates the page pool on the context's device. */
  vkattnx_kv_cache(vkattn_context* ctx, const vkattn_kv_cache_desc* desc) {
    vkattnx_kv_cache* box = (vkattnx_kv_cache*)calloc(1, sizeof *box);
    if (!box) {
      vkattnx_fail("vkattn: out of host memory");
      return NULL;
    }
    if (!vkattnx_ok(vkattn_kv_cache_create(ctx, desc, &box->cache))) {
      free(box);
      return NULL;
    }
    box->dtype = desc->dtype; /* desc is not NULL: create succeeded */
    box->num_kv_heads = desc->num_kv_heads;
    return box;
  }
  ~vkattnx_kv_cache() {
    vkattn_kv_cache_destroy(self->cache);
    free(self);
  }

  /* Committed tokens of a sequence (0 if it does not exist). */
  int32_t m_length(int64_t seqId) {
    int32_t n = 0;
    VKATTNX_CACHE(self, 0);
    vkattnx_ok(vkattn_kv_cache_length(self->cache, seqId, &n));
    return n;
  }
  void m_remove(int64_t seqId) {
    VKATTNX_CACHE(self, );
    vkattnx_ok(vkattn_kv_cache_remove(self->cache, seqId));
  }
  /* dst (a new id) shares every page of src. */
  void m_fork(int64_t src, int64_t dst) {
    VKATTNX_CACHE(self, );
    vkattnx_ok(vkattn_kv_cache_fork(self->cache, src, dst));
  }
  void m_truncate(int64_t seqId, int32_t newLength) {
    VKATTNX_CACHE(self, );
    vkattnx_ok(vkattn_kv_cache_truncate(self->cache, seqId, newLength));
  }
  int64_t m_numFreePages() {
    uint32_t n = 0;
    VKATTNX_CACHE(self, 0);
    vkattnx_ok(vkattn_kv_cache_num_free_pages(self->cache, &n));
    return (int64_t)n;
  }
  vkattn_dtype m_dtype() {
    VKATTNX_CACHE(self, VKATTN_F16);
    return self->dtype;
  }
  /* Committed tokens [start, start + count) of one layer: k [count, Hkv, d],
   * v [count, Hkv, dv] (f32 cache: float arrays; f16/bf16: 16-bit bits). */
  void m_readF32(int32_t layer, int64_t seqId, int32_t start, int32_t count, float* kDst,
                 int64_t kCount, float* vDst, int64_t vCount) {
    vkattnx_cache_read(self, layer, seqId, start, count, kDst, kCount, vDst, vCount, 4,
                       self && self->dtype == VKATTN_F32, "float");
  }
  void m_readU16(int32_t layer, int64_t seqId, int32_t start, int32_t count, uint16_t* kDst,
                 int64_t kCount, uint16_t* vDst, int64_t vCount) {
    vkattnx_cache_read(self, layer, seqId, start, count, kDst, kCount, vDst, vCount, 2,
                       self && (self->dtype == VKATTN_F16 || self->dtype == VKATTN_BF16),
                       "16-bit");
  }
  /* 8-bit caches (i8, fp8_e4m3): the stored codes as bytes, and the f32
   * scales that dequantize them, k [count, Hkv], v [count, Hkv]. q4
   * caches: one int8 code (-8..7) per element, and the block scales. */
  void m_readBytes(int32_t layer, int64_t seqId, int32_t start, int32_t count, uint8_t* kDst,
                   int64_t kCount, uint8_t* vDst, int64_t vCount) {
    vkattnx_cache_read(self, layer, seqId, start, count, kDst, kCount, vDst, vCount, 1,
                       self && (self->dtype == VKATTN_I8 || self->dtype == VKATTN_FP8_E4M3 ||
                                self->dtype == VKATTN_Q4),
                       "byte");
  }
  void m_readBlockScales(int32_t layer, int64_t seqId, int32_t start, int32_t count, float* kDst,
                         int64_t kCount, float* vDst, int64_t vCount) {
    VKATTNX_CACHE(self, );
    if (!kDst || !vDst || kCount < 0 || vCount < 0) {
      vkattnx_fail("vkattn: the block scale arrays must not be null");
      return;
    }
    vkattnx_ok(vkattn_kv_cache_read_block_scales(self->cache, (uint32_t)layer, seqId, start, count,
                                                 kDst, (size_t)kCount, vDst, (size_t)vCount));
  }
  void m_readScales(int32_t layer, int64_t seqId, int32_t start, int32_t count, float* kDst,
                    int64_t kCount, float* vDst, int64_t vCount) {
    VKATTNX_CACHE(self, );
    if (!kDst || !vDst) {
      vkattnx_fail("vkattn: the scale array for %s is null", kDst ? "v" : "k");
      return;
    }
    if (count < 0 || kCount != (int64_t)count * self->num_kv_heads || vCount != kCount) {
      vkattnx_fail("vkattn: the scale arrays hold %lld and %lld floats, want count x Hkv = %lld",
                   (long long)kCount, (long long)vCount,
                   (long long)count * self->num_kv_heads);
      return;
    }
    vkattnx_ok(vkattn_kv_cache_read_scales(self->cache, (uint32_t)layer, seqId, start, count,
                                           kDst, vDst));
  }
  /* fp8 caches: K and V scales of one layer (1 or Hkv each), before its
   * first append. */
  void m_setScales(int32_t layer, const float* kScales, int64_t kCount, const float* vScales,
                   int64_t vCount) {
    VKATTNX_CACHE(self, );
    if (!kScales || !vScales || kCount != vCount || kCount > UINT32_MAX) {
      vkattnx_fail("vkattn: setScales wants two arrays of one length (1 or Hkv)");
      return;
    }
    vkattnx_ok(vkattn_kv_cache_set_scales(self->cache, (uint32_t)layer, (uint32_t)kCount,
                                          kScales, vScales));
  }

  /* Opens a step: seqIds[i] brings numNewTokens[i] new tokens (unknown ids
   * start new sequences). CACHE_FULL leaves the cache as it was. */
  vkattnx_step* m_begin(const int64_t* seqIds, int64_t numSeqs, const int32_t* numNewTokens,
                        int64_t numCounts) {
    vkattnx_step* step;
    VKATTNX_CACHE(self, NULL);
    if (!seqIds || !numNewTokens) {
      vkattnx_fail("vkattn: the %s array is null", seqIds ? "numNewTokens" : "seqIds");
      return NULL;
    }
    if (numSeqs != numCounts || numSeqs > UINT32_MAX) {
      vkattnx_fail("vkattn: %lld sequence ids but %lld token counts", (long long)numSeqs,
                   (long long)numCounts);
      return NULL;
    }
    step = (vkattnx_step*)calloc(1, sizeof *step);
    if (!step) {
      vkattnx_fail("vkattn: out of host memory");
      return NULL;
    }
    if (!vkattnx_ok(vkattn_step_begin(self->cache, (uint32_t)numSeqs, seqIds, numNewTokens,
                                      &step->step))) {
      free(step);
      return NULL;
    }
    step->batch = numSeqs;
    return step;
  }
}

%extend vkattnx_step {
  /* An open step is aborted. */
  ~vkattnx_step() {
    vkattn_step_abort(self->step);
    free(self);
  }
  /* Writes this step's new K/V of one layer: [total_new, Hkv, d] / [.., dv]. */
  void m_append(int32_t layer, vkattn_tensor* k, vkattn_tensor* v) {
    VKATTNX_STEP(self, );
    vkattnx_ok(vkattn_step_append(self->step, (uint32_t)layer, k, v));
  }
  /* append() with the keys rotated by `rope` (positions len + i). */
  void m_appendRope(int32_t layer, const vkattn_rope_desc* rope, vkattn_tensor* k,
                    vkattn_tensor* v) {
    VKATTNX_STEP(self, );
    vkattnx_ok(vkattn_step_append_rope(self->step, (uint32_t)layer, rope, k, v));
  }
  /* Attention of q [total_new, H, d] over each sequence's len + t tokens of
   * this layer (append it first): out [total_new, H, dv]. */
  void m_attention(int32_t layer, const vkattn_attention_desc* desc, vkattn_tensor* q,
                   vkattn_tensor* out) {
    VKATTNX_STEP(self, );
    if (!vkattnx_spans_fit(desc, self->batch) || !vkattnx_trees_fit(desc, self->batch)) return;
    vkattnx_ok(vkattn_step_attention(self->step, (uint32_t)layer, desc, q, out));
  }
  /* Lengths advance by the step's token counts; the step is finished. */
  void m_commit() {
    VKATTNX_STEP(self, );
    if (vkattnx_ok(vkattn_step_commit(self->step))) self->step = NULL;
  }
  /* Drops the step's tokens; a finished step is left as it is. */
  void m_abort() {
    if (!self) {
      vkattnx_fail("vkattn: this Step is closed");
      return;
    }
    vkattn_step_abort(self->step);
    self->step = NULL;
  }
  /* True until committed, aborted or closed. */
  bool m_isActive() {
    return self && self->step;
  }
}
