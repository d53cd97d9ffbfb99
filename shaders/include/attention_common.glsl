// Pieces shared by attention_fwd.comp and attention_combine.comp: the work
// item and sequence records written by src/ops/attention_plan.cpp, flags,
// and the output row store.
#ifndef VKATTN_ATTENTION_COMMON_GLSL
#define VKATTN_ATTENTION_COMMON_GLSL

#include "dtype.glsl"

#define NEG_INF (-1.0 / 0.0)
#define NO_SLOT 0xffffffffu

// Runtime flags (push constant `flags`), mirrored in src/ops/attention_plan.h.
#define F_CAUSAL 1u
#define F_WINDOW 2u
#define F_SOFTCAP 4u
#define F_ALIBI 8u
#define F_MASK_BOOL 16u
#define F_MASK_ADD 32u
#define F_KEY_VALID 64u
#define F_WRITE_LSE 128u

// Work item: a tile of rows (token, head-in-group) of one (sequence, kv
// head) against keys [k_begin, k_end). slot != NO_SLOT: write a partial.
struct Item {
  uint seq, kv_head, row0, slot;
  uint k_begin, k_end, n_slots, pad;
};

struct Seq {
  uint q_off, k_off, t, u;
  uint mask_off, pad0, pad1, pad2;
};

// Element bits of a 16-bit dtype into word array `buf` at element `idx`
// with atomics: neighbours in the same word may belong to another row.
#define STORE16_ATOMIC(buf, idx, bits)                              \
  {                                                                 \
    uint sh_ = ((idx)&1u) * 16u;                                    \
    atomicAnd(buf[(idx) >> 1], ~(0xffffu << sh_));                  \
    atomicOr(buf[(idx) >> 1], ((bits)&0xffffu) << sh_);             \
  }

#endif
