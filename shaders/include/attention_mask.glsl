// Which (row, key) pairs a forward pass sees and the transforms of their
// scores, one pair at a time: the semantics every attention family shares
// (DESIGN.md: bottom-right causal, window, padding keys, bool and additive
// masks, softcap, ALiBi). Include after attention_fetch.glsl. A hidden pair
// is selected out by the caller (its score becomes -inf; never 0 * V).
#ifndef VKATTN_ATTENTION_MASK_GLSL
#define VKATTN_ATTENTION_MASK_GLSL

layout(std430, binding = 7) readonly buffer Mask {
  uint mask_w[];
};
layout(std430, binding = 8) readonly buffer Alibi {
  float alibi[];
};
layout(std430, binding = 9) readonly buffer KeyValid {
  uint key_valid_w[];
};
layout(std430, binding = 15) readonly buffer TreeWords {
  uint tree_words[];
};
layout(std430, binding = 16) readonly buffer TopK {
  int topk_idx[];
};

// F_TOPK: the key position in slot `slot` of token `tok`'s list (this
// item's kv head), or NO_SLOT where the entry names none: below 0, at or
// past u, or (paged, the pages in several pool buffers) a key whose page
// lies in another buffer than this pass's (its block-table entry in this
// pass's copy of the table is NO_SLOT; that buffer's pass reads it).
// (Families decode and lanes; the others never get a call with lists.)
uint listed_key(Seq sq, uint tok, uint kv_head, uint slot) {
  int p = topk_idx[sq.topk_off + tok * sq.topk_stride + kv_head * sq.topk_hs + slot];
  if (p < 0 || uint(p) >= sq.u) return NO_SLOT;
  if (PAGED != 0u && block_table[sq.k_off + uint(p) / pc.page_size - pc.table_base] == NO_SLOT)
    return NO_SLOT;
  return uint(p);
}

// Causal (key <= pos) and window (pos - key <= window_left) for the row at
// absolute position pos = u - t + token.
bool in_causal_window(int pos, int key, bool causal, bool windowed) {
  return (!causal || key <= pos) && (!windowed || pos - key <= pc.window_left);
}

// Every positional rule for the row at position pos: causal, the left
// window, and where compiled in the right window (key - pos <=
// window_right) and the chunks (floor(key / C) == floor(pos / C); a
// negative pos lies in a negative chunk and sees nothing). Each rule keeps
// an interval of keys holding pos (when pos >= 0), so their intersection
// is one too; a bidirectional span (F_SPAN: the planner gives rows inside
// a span a record of their own, so sq's span holds pos) adds an interval
// holding pos, and the union is still one interval: a tile whose first
// and last keys pass passes whole (attention_tiled.glsl).
bool in_view(Seq sq, int pos, int key, bool causal, bool windowed) {
  bool v = in_causal_window(pos, key, causal, windowed);
  if (uses(F_WINDOW_RIGHT)) v = v && key - pos <= sq.window_right;
  if (uses(F_CHUNK))
    v = v && pos >= 0 && key >= 0 && uint(pos) / sq.chunk_size == uint(key) / sq.chunk_size;
  if (uses(F_SPAN)) v = v || uint(key) - sq.span_lo < sq.span_hi - sq.span_lo;
  return v;
}

// Key `key` of sequence sq is not padding (F_KEY_VALID).
bool key_is_valid(Seq sq, uint key) {
  uint kidx = sq.k_off + key - pc.key_valid_base;
  return ((key_valid_w[kidx >> 2] >> ((kidx & 3u) * 8u)) & 0xffu) != 0u;
}

// F_TREE: the sequence's tree lets row `token` see key `key` (keys before
// the queries' own block, u - t .. u - 1, are untouched; bit key - (u - t)
// of the row's words, least significant first). A sequence without a tree
// (tree_w 0) sees everything; a row or key past the block sees nothing.
bool tree_allows(Seq sq, uint token, uint key) {
  if (sq.tree_w == 0u || key < sq.u - sq.t) return true;
  uint b = key - (sq.u - sq.t);
  if (token >= sq.t || b >= sq.t) return false;
  return ((tree_words[sq.tree_off + token * sq.tree_w + (b >> 5)] >> (b & 31u)) & 1u) != 0u;
}

// F_TREE: tree_allows for the 32 keys k0 .. k0 + 31 of row `token` at
// once (bit j: key k0 + j), from at most two of the row's words: tiles
// test a bit per pair instead of loading a word per pair. Keys past the
// block (past u) get whatever bits follow; the key range hides them.
uint tree_bits(Seq sq, uint token, uint k0) {
  const uint first = sq.u - sq.t;
  if (sq.tree_w == 0u || k0 + 32u <= first) return ~0u;
  if (token >= sq.t) return 0u;
  const uint row = sq.tree_off + token * sq.tree_w;
  if (k0 < first) {  // 1 .. 31 keys before the block, then its first bits
    const uint n = first - k0;
    return (tree_words[row] << n) | ((1u << n) - 1u);
  }
  const uint b = k0 - first, w = b >> 5, s = b & 31u;
  if (w >= sq.tree_w) return 0u;
  const uint lo = tree_words[row + w];
  const uint hi = w + 1u < sq.tree_w ? tree_words[row + w + 1u] : 0u;
  return s == 0u ? lo : (lo >> s) | (hi << (32u - s));
}

// A tile of keys [k0, k1) that no tree bit touches (it ends before the
// queries' own block, or the sequence has no tree).
bool tree_free(Seq sq, uint k1) {
  return !uses(F_TREE) || sq.tree_w == 0u || k1 <= sq.u - sq.t;
}

// Element of the mask for (token, key) of sequence sq (t x u, row-major).
uint mask_index(Seq sq, uint token, uint key) {
  return sq.mask_off + token * sq.u + key - pc.mask_base;
}

// F_MASK_BOOL: the pair is allowed.
bool mask_allows(uint midx) {
  return ((mask_w[midx >> 2] >> ((midx & 3u) * 8u)) & 0xffu) != 0u;
}

// F_MASK_ADD: the additive bias (-inf hides the pair).
float mask_bias(uint midx) {
  return LOAD_ELEM(mask_w, pc.mask_dtype, midx);
}

// F_SOFTCAP: softcap * tanh(s / softcap), to a few f32 ulp over the whole
// line. The builtin tanh may go through exponentials (Mesa's spirv-to-NIR
// lowers it to (e^y - e^-y) / (e^y + e^-y)), which returns 0 for
// |y| < 2^-25 and loses most digits below 1e-3, so a cap far above the
// logits would flatten them. Below |y| = 1/8 the
// odd series is taken as s * (1 - y^2/3 + ...) (next term 62/2835 y^8,
// under 2e-9 relative there), so a y that underflows or is flushed to 0
// (cap near FLT_MAX) still gives s; above, 1 - e^-2|y| has lost at most 3
// bits. Infinite |y| gives +-softcap, NaN stays NaN. The host raises a
// cap below FLT_MIN to FLT_MIN (record.cpp), so s / softcap is never 0/0.
float soft_capped(float s) {
  const float y = s / pc.softcap, a = abs(y);
  if (a < 0.125) {
    const float y2 = y * y;
    return s * (1.0 + y2 * (-1.0 / 3.0 + y2 * (2.0 / 15.0 + y2 * (-17.0 / 315.0))));
  }
  const float e = exp(-2.0 * a);
  return pc.softcap * (sign(y) * ((1.0 - e) / (1.0 + e)));
}

// F_ALIBI: the bias of query head `head` at position pos for key `key`.
float alibi_bias(uint head, int pos, int key) {
  return -alibi[head] * float(abs(pos - key));
}

// Attention variants (user functions, vkattn_variant; spliced in at run
// time by src/ops/attention/user_functions.cpp, which defines
// USER_FUNCTIONS and resolves "vkattn_user.glsl" to the user's
// source behind its parameter accessors). USER_MASK: the source
// defines vkattn_mask_mod; USER_SCORE: vkattn_score_mod. Every
// family applies them after its built-in rules and terms: user_allows
// joins the visibility, user_score takes the score after scale, softcap,
// ALiBi and the additive mask (a -inf result hides the key).
#ifndef USER_MASK
#define USER_MASK 0
#endif
#ifndef USER_SCORE
#define USER_SCORE 0
#endif
#ifdef USER_FUNCTIONS
// The user's source behind its parameter accessors, and the parameters'
// binding (the family's last binding + 1), written by the host.
#include "vkattn_user.glsl"
// First in every family's main: the parameters' offsets and counts.
#define USER_INIT() vkattn_user_init()
#else
#define USER_INIT()
#endif
// USER_FAULT (VKATTN_FAULT_USER=1): the families' splice gets odd keys
// wrong (the mask flipped, the score plus 4), the self-check's table
// kernel does not, so the self-check of variant pipelines can be watched.
bool user_allows(Seq sq, uint head, int pos, int key) {
#if USER_MASK != 0 && defined(USER_FAULT)
  return vkattn_mask_mod(sq.call_seq, head, pos, key) != ((key & 1) == 1);
#elif USER_MASK != 0
  return vkattn_mask_mod(sq.call_seq, head, pos, key);
#else
  return true;
#endif
}
float user_score(Seq sq, uint head, int pos, int key, float s) {
#if USER_SCORE != 0 && defined(USER_FAULT)
  return vkattn_score_mod(s, sq.call_seq, head, pos, key) + ((key & 1) == 1 ? 4.0 : 0.0);
#elif USER_SCORE != 0
  return vkattn_score_mod(s, sq.call_seq, head, pos, key);
#else
  return s;
#endif
}

#endif
