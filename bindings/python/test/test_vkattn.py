"""pytest suite of the Python binding (ctest bindings.python): every result
is checked against an explicit NumPy softmax(Q K^T) V in float64; the
validation layer is on in every context and must stay silent."""

import threading
import time

import numpy as np
import pytest

import vkattn


@pytest.fixture
def ctx():
    c = vkattn.Context(validation=True)
    yield c
    assert c.validation_messages == 0
    c.close()


def ref_attention(q, k, v, causal=False, window_left=-1, scale=0.0, softcap=0.0,
                  alibi=None, key_valid=None, sinks=None, window_right=-1, chunk_size=0,
                  spans=(), user_vis=None, user_bias=None):
    """One sequence: q [t, H, d], k [u, Hkv, d], v [u, Hkv, dv] -> out [t, H,
    dv], lse [t, H], as the C header defines them (bottom-right alignment)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    t, h, d = q.shape
    u, hkv, dv = v.shape
    g = h // hkv
    scale = scale or 1.0 / np.sqrt(d)
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = np.einsum("thd,uhd->htu", q, kk) * scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    pos = u - t + np.arange(t)
    j = np.arange(u)
    if alibi is not None:
        s -= np.asarray(alibi, np.float64)[:, None, None] * np.abs(pos[:, None] - j[None, :])
    vis = np.ones((t, u), bool)
    if causal:
        vis &= j[None, :] <= pos[:, None]
    if window_left >= 0:
        vis &= pos[:, None] - j[None, :] <= window_left
    if window_right >= 0:
        vis &= j[None, :] - pos[:, None] <= window_right
    if chunk_size:
        vis &= (j[None, :] // chunk_size) == (pos[:, None] // chunk_size)  # floor division
    for lo, hi in spans:  # a query inside a span sees all of it
        inside = (pos >= lo) & (pos < hi)
        vis |= inside[:, None] & (j[None, :] >= lo) & (j[None, :] < hi)
    if key_valid is not None:
        vis &= np.asarray(key_valid, bool)[None, :]
    if user_vis is not None:  # an attention variant's mask function, [t, u]
        vis &= user_vis
    if user_bias is not None:  # ... and its score function as a bias, [h, t, u]
        s = s + user_bias
    s = np.where(vis[None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True) if u else np.full((h, t, 1), -np.inf)
    safe = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - safe)
    l = p.sum(axis=-1, keepdims=True)
    out = np.einsum("htu,uhd->thd", np.where(l > 0, p / np.where(l > 0, l, 1), 0), vv)
    lse = np.where(l[..., 0] > 0, np.log(np.where(l[..., 0] > 0, l[..., 0], 1)) + safe[..., 0],
                   -np.inf).T
    if sinks is not None:  # joins the denominator: lse' = logaddexp(lse, sink)
        joined = np.logaddexp(lse, np.asarray(sinks, np.float64)[None, :])
        with np.errstate(invalid="ignore"):  # -inf - -inf: a row with neither
            out = out * np.where(np.isneginf(lse), 0.0, np.exp(lse - joined))[..., None]
        lse = joined
    return out, lse


def rand(rng, shape, dtype=np.float32):
    return rng.uniform(-1, 1, shape).astype(dtype)


def nan_beyond(a, n):
    """A copy of ``a`` whose rows from n on are NaN (memory past the valid
    lengths must never reach an output)."""
    a = a.copy()
    a[n:] = np.nan
    return a


def test_version_and_devices():
    # The package's release (text) is the loaded library's (encoded).
    v = vkattn.version()
    assert vkattn.__version__ == "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)
    assert v >= 500
    n = vkattn.device_count()
    assert n >= 1
    info = vkattn.device_info(0)
    assert info["name"] and info["subgroup_size"] >= 1
    with pytest.raises(vkattn.Error) as e:
        vkattn.device_info(n)
    assert e.value.status == vkattn.ERROR_INVALID_ARGUMENT


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("causal,window", [(False, -1), (True, -1), (True, 5), (False, 3)])
def test_varlen_matches_numpy(ctx, dtype, causal, window):
    rng = np.random.default_rng(1)
    h, hkv, d, dv = 8, 2, 40, 24  # GQA, odd-sized dims, dv != d
    lens = [(7, 9), (0, 5), (12, 4), (3, 0), (1, 30)]  # t > u, empty sides
    tq, tk = sum(t for t, _ in lens), sum(u for _, u in lens)
    q, k, v = rand(rng, (tq, h, d), dtype), rand(rng, (tk, hkv, d), dtype), rand(rng, (tk, hkv, dv), dtype)
    cu_q = np.cumsum([0] + [t for t, _ in lens])
    cu_k = np.cumsum([0] + [u for _, u in lens])
    lse_t = ctx.empty((tq, h), vkattn.F32)
    with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V:
        out = vkattn.attention_varlen(Q, K, V, cu_q, cu_k, causal=causal, window_left=window,
                                      lse=lse_t)
        got, lse = out.numpy().astype(np.float64), lse_t.numpy()
        out.close()
    lse_t.close()
    tol = 2e-3 if dtype == np.float16 else 2e-5
    for b, (t, u) in enumerate(lens):
        ro, rl = ref_attention(q[cu_q[b]:cu_q[b + 1]], k[cu_k[b]:cu_k[b + 1]],
                               v[cu_k[b]:cu_k[b + 1]], causal, window)
        np.testing.assert_allclose(got[cu_q[b]:cu_q[b + 1]], ro, atol=tol, rtol=0)
        want_lse = rl
        have = lse[cu_q[b]:cu_q[b + 1]]
        assert np.array_equal(np.isneginf(have), np.isneginf(want_lse))
        fin = np.isfinite(want_lse)
        np.testing.assert_allclose(have[fin], want_lse[fin], atol=tol * 10, rtol=0)


@pytest.mark.parametrize("causal,left,right,chunk",
                         [(False, 3, 2, 0), (False, -1, 0, 0), (True, -1, -1, 5),
                          (False, 4, 4, 7)])
def test_two_sided_windows_and_chunks(ctx, causal, left, right, chunk):
    rng = np.random.default_rng(11)
    t, u, h, hkv, d = 9, 23, 4, 2, 16
    q, k, v = rand(rng, (t, h, d)), rand(rng, (u, hkv, d)), rand(rng, (u, hkv, d))
    with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V:
        got = vkattn.attention_varlen(Q, K, V, [0, t], [0, u], causal=causal,
                                      window_left=left, window_right=right,
                                      chunk_size=chunk).numpy()
    ro, _ = ref_attention(q, k, v, causal, left, window_right=right, chunk_size=chunk)
    np.testing.assert_allclose(got, ro, atol=2e-5, rtol=0)


def test_spans_from_token_type_ids():
    indptr, spans = vkattn.spans_from_token_type_ids([0, 1, 1, 0, 1, 1, 1])
    assert indptr.tolist() == [0, 2] and spans.tolist() == [1, 3, 4, 7]
    indptr, spans = vkattn.spans_from_token_type_ids(np.array([[1, 1, 0, 0], [0, 0, 0, 0]]))
    assert indptr.tolist() == [0, 1, 1] and spans.tolist() == [0, 2]
    indptr, spans = vkattn.spans_from_token_type_ids([[0, 2, 2], [2]], span_type=2)
    assert indptr.tolist() == [0, 1, 2] and spans.tolist() == [1, 3, 0, 1]


@pytest.mark.parametrize("causal,left", [(True, -1), (True, 3), (False, 2)])
def test_bidirectional_spans(ctx, causal, left):
    """Gemma 3's image tokens: two sequences, spans from token_type_ids,
    against the reference (spans OR'd onto causal and the window)."""
    rng = np.random.default_rng(12)
    h, hkv, d = 4, 2, 16
    types = [np.array([0] * 3 + [1] * 6 + [0] * 4 + [1] * 5 + [0] * 2), np.array([0, 1, 1, 1, 0])]
    lens = [len(x) for x in types]
    indptr, spans = vkattn.spans_from_token_type_ids(types)
    cu = np.concatenate(([0], np.cumsum(lens))).astype(np.int32)
    q, k, v = (rand(rng, (cu[-1], n, d)) for n in (h, hkv, hkv))
    with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V:
        got = vkattn.attention_varlen(Q, K, V, cu, cu, causal=causal, window_left=left,
                                      span_indptr=indptr, spans=spans).numpy()
        # An indptr that does not fit the batch raises instead of reading past it.
        with pytest.raises(vkattn.Error, match="span_indptr has 2 entries"):
            vkattn.attention_varlen(Q, K, V, cu, cu, span_indptr=[0, 1], spans=[0, 2])
        with pytest.raises(vkattn.Error, match="INVALID_ARGUMENT|spans"):
            vkattn.attention_varlen(Q, K, V, cu, cu, span_indptr=[0, 1, 1], spans=[5, 2])
    for b in range(2):
        pairs = spans[2 * indptr[b]:2 * indptr[b + 1]].reshape(-1, 2)
        ro, _ = ref_attention(q[cu[b]:cu[b + 1]], k[cu[b]:cu[b + 1]], v[cu[b]:cu[b + 1]],
                              causal, left, spans=[tuple(p) for p in pairs])
        np.testing.assert_allclose(got[cu[b]:cu[b + 1]], ro, atol=2e-5, rtol=0)


def random_tree(rng, n):
    """A draft tree of n tokens, node i's parent drawn from [0, i): [n, n]
    bools whose row i is its parent's row plus i itself (its ancestors)."""
    m = np.zeros((n, n), bool)
    for i in range(n):
        if i:
            m[i] = m[rng.integers(0, i)]
        m[i, i] = True
    return m


def test_tree_mask_from_bool():
    # Bit j % 32 of word j // 32, least significant first; ceil(t / 32) words a row.
    m = np.eye(33, dtype=bool)
    m[32, 0] = True
    indptr, words = vkattn.tree_mask_from_bool([None, np.ones((2, 2), bool), m])
    assert indptr.dtype == np.int32 and words.dtype == np.uint32
    assert indptr.tolist() == [0, 0, 2, 2 + 33 * 2]
    assert words[:2].tolist() == [3, 3]
    rows = words[2:].reshape(33, 2)
    assert rows[0].tolist() == [1, 0] and rows[31].tolist() == [1 << 31, 0]
    assert rows[32].tolist() == [1, 1]
    indptr, words = vkattn.tree_mask_from_bool(np.tril(np.ones((3, 3), bool)))  # one sequence
    assert indptr.tolist() == [0, 3] and words.tolist() == [1, 3, 7]
    indptr, words = vkattn.tree_mask_from_bool([None])
    assert indptr.tolist() == [0, 0] and words.size == 0
    with pytest.raises(ValueError, match="square"):
        vkattn.tree_mask_from_bool([np.ones((2, 3), bool)])


def tree_case(rng):
    """Two sequences: a 9-token draft tree over 40 keys, then 5 queries
    over 12 keys without a tree; the trees' arrays and the bool mask that
    equals them (1-D, each sequence's t x u block row-major)."""
    ts, us = [9, 5], [40, 12]
    trees = [random_tree(rng, 9), None]
    indptr, words = vkattn.tree_mask_from_bool(trees)
    blocks = []
    for t, u, tree in zip(ts, us, trees):
        block = np.ones((t, u), np.uint8)  # the keys before the block: untouched
        if tree is not None:
            block[:, u - t:] = tree
        blocks.append(block.reshape(-1))
    cu_q = np.concatenate(([0], np.cumsum(ts))).astype(np.int32)
    cu_k = np.concatenate(([0], np.cumsum(us))).astype(np.int32)
    return cu_q, cu_k, indptr, words, np.concatenate(blocks)


@pytest.mark.parametrize("causal", [True, False])
def test_speculative_trees_equal_their_bool_mask(ctx, causal):
    rng = np.random.default_rng(14)
    h, hkv, d = 4, 2, 16
    cu_q, cu_k, indptr, words, mask = tree_case(rng)
    q = rand(rng, (cu_q[-1], h, d))
    k, v = rand(rng, (cu_k[-1], hkv, d)), rand(rng, (cu_k[-1], hkv, d))
    desc = vkattn.AttentionDesc(tree_indptr=indptr, tree_mask=words)
    assert desc["tree_indptr"].tolist() == indptr.tolist()
    assert desc["tree_mask"].tolist() == words.tolist()
    with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V, ctx.tensor(mask) as M:
        got = vkattn.attention_varlen(Q, K, V, cu_q, cu_k, causal=causal, tree_indptr=indptr,
                                      tree_mask=words).numpy()
        want = vkattn.attention_varlen(Q, K, V, cu_q, cu_k, causal=causal, mask=M,
                                       mask_type=vkattn.MASK_BOOL).numpy()
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    # The tree changes the result: some query misses a key causal gives it.
    with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V:
        plain = vkattn.attention_varlen(Q, K, V, cu_q, cu_k, causal=causal).numpy()
    assert np.abs(plain[:9] - got[:9]).max() > 1e-3
    np.testing.assert_allclose(plain[9:], got[9:], atol=1e-5, rtol=0)


def test_trees_in_a_cache_step_equal_one_varlen_call(ctx):
    """Speculative decoding: a committed prompt, then a step verifying a
    9-token draft tree; the step's result equals a varlen call with the
    same tree over the same keys."""
    rng = np.random.default_rng(15)
    h, hkv, d, prompt, t = 4, 2, 16, 31, 9
    k, v = rand(rng, (prompt + t, hkv, d)), rand(rng, (prompt + t, hkv, d))
    q = rand(rng, (t, h, d))
    indptr, words = vkattn.tree_mask_from_bool([random_tree(rng, t)])
    with ctx.kv_cache(1, hkv, d, num_pages=8, page_size=8, dtype=vkattn.F32) as cache:
        with cache.begin([7], [prompt]) as step:
            step.append(0, k[:prompt], v[:prompt])
            step.commit()
        with cache.begin([7], [t]) as step:
            step.append(0, k[prompt:], v[prompt:])
            with step.attention(0, q, causal=True, tree_indptr=indptr, tree_mask=words) as out:
                got = out.numpy()
            with pytest.raises(vkattn.Error, match="tree_indptr has 3 entries"):
                step.attention(0, q, causal=True, tree_indptr=[0, 9, 9], tree_mask=words)
    with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V:
        want = vkattn.attention_varlen(Q, K, V, [0, t], [0, prompt + t], causal=True,
                                       tree_indptr=indptr, tree_mask=words).numpy()
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_short_tree_arrays_raise(ctx):
    rng = np.random.default_rng(16)
    h, hkv, d = 4, 2, 16
    cu_q, cu_k, indptr, words, _ = tree_case(rng)
    q, k = rand(rng, (cu_q[-1], h, d)), rand(rng, (cu_k[-1], hkv, d))
    with ctx.tensor(q) as Q, ctx.tensor(k) as K:
        # Arrays shorter than the call needs raise instead of being read past their end.
        with pytest.raises(vkattn.Error, match="tree_indptr has 2 entries, the call needs 3"):
            vkattn.attention_varlen(Q, K, K, cu_q, cu_k, tree_indptr=indptr[:2], tree_mask=words)
        with pytest.raises(vkattn.Error, match="counts 9 words, the tree_mask array holds 8"):
            vkattn.attention_varlen(Q, K, K, cu_q, cu_k, tree_indptr=indptr, tree_mask=words[:8])
        with pytest.raises(vkattn.Error, match="tree_mask is set but tree_indptr is not"):
            vkattn.attention_varlen(Q, K, K, cu_q, cu_k, tree_mask=words)
        with pytest.raises(OverflowError, match="tree_mask"):
            vkattn.attention_varlen(Q, K, K, cu_q, cu_k, tree_indptr=indptr, tree_mask=[-1] * 9)


def test_tree_mask_from_bool_takes_bools_only():
    # Floats, strings and None are no bools (0.5, NaN and 2 used to be read
    # as true); integers take 0 and 1 only; the input must be [t, t] mats.
    for masks in ("abc", None, 5, np.array(True), np.ones(3, bool)):
        with pytest.raises((TypeError, ValueError), match="vkattn: tree_mask_from_bool takes"):
            vkattn.tree_mask_from_bool(masks)
    for m in (np.full((3, 3), 0.5), np.full((2, 2), np.nan), [["a", "b"], ["c", "d"]],
              [[True, None], [True, True]]):
        with pytest.raises(TypeError, match="tree mask 0 must hold bools"):
            vkattn.tree_mask_from_bool([m])
    for m, bad in ((np.full((2, 2), 2), 2), (-np.eye(2, dtype=np.int8), -1)):
        with pytest.raises(ValueError, match="tree mask 0 holds %d, must be bool or 0/1" % bad):
            vkattn.tree_mask_from_bool([m])
    with pytest.raises(ValueError, match="rows differ in length"):
        vkattn.tree_mask_from_bool([[[True, True], [True]]])
    indptr, words = vkattn.tree_mask_from_bool([np.eye(2, dtype=np.uint8), np.zeros((0, 0), bool)])
    assert indptr.tolist() == [0, 2, 2] and words.tolist() == [1, 2]


def test_bad_tree_arguments_raise(ctx):
    """Wrong types, values past int32/uint32, negative, decreasing or empty
    arrays raise TypeError, OverflowError or vkattn.Error, never a value cut
    into range; a set that raises keeps the trees set before it."""
    rng = np.random.default_rng(17)
    h, hkv, d = 4, 2, 16
    cu_q, cu_k, indptr, words, _ = tree_case(rng)
    q, k = rand(rng, (cu_q[-1], h, d)), rand(rng, (cu_k[-1], hkv, d))
    type_errors = [
        (dict(tree_indptr=indptr.astype(np.float32)),
         "tree_indptr must hold integers, got float32"),
        (dict(tree_indptr=[0.0, 9.0, 9.0]),
         "tree_indptr element must be an integer, got the float"),
        (dict(tree_indptr="009"), "tree_indptr must be an array of integers"),
        (dict(tree_indptr=np.array([0, 1, 1], bool)), "tree_indptr must hold integers, got a bool"),
        (dict(tree_indptr=np.array(["0", "9", "9"])), "tree_indptr must hold integers, got <U1"),
        (dict(tree_mask=np.ones(9, bool)), "tree_mask must hold integers, got a bool"),
        (dict(tree_mask=words.astype(np.float64)), "tree_mask must hold integers, got float64"),
        (dict(tree_mask=[None] * 9), "tree_mask element must be an integer, got None"),
    ]
    overflows = [
        (dict(tree_indptr=[0, 2**31, 2**31]), "tree_indptr holds 2147483648, outside int32"),
        (dict(tree_indptr=np.array([0, 2**32 + 9, 2**32 + 9], np.int64)),
         "tree_indptr holds 4294967305"),
        (dict(tree_indptr=np.array([0, 2**32 - 1, 2**32 - 1], np.uint32)),
         "tree_indptr holds 4294967295"),
        (dict(tree_mask=[2**32] * 9), "tree_mask holds 4294967296, outside uint32"),
        (dict(tree_mask=[2**63 - 1] * 9), "tree_mask holds 9223372036854775807"),
        (dict(tree_mask=[2**64] * 9), "tree_mask element = 18446744073709551616 is outside uint32"),
        (dict(tree_mask=np.full(9, -1, np.int8)), "tree_mask holds -1, outside uint32"),
    ]
    errors = [
        (dict(tree_indptr=[0, -9, -9]), "desc->tree_indptr decreases at 1 \\(0 -> -9\\)"),
        (dict(tree_indptr=[0, 100, 9]), "desc->tree_indptr decreases at 2 \\(100 -> 9\\)"),
        (dict(tree_indptr=[5, 9, 9]), "desc->tree_indptr\\[0\\] is 5, must be 0"),
        (dict(tree_indptr=[0, 2**31 - 1, 2**31 - 1]),
         "counts 2147483647 words, the tree_mask array holds 9"),
        (dict(tree_indptr=[0, 8, 8]), "sequence 0 has 8 words, must be t \\* ceil\\(t / 32\\) = 9"),
        (dict(tree_indptr=[]), "tree_indptr needs batch \\+ 1 >= 1 entries \\(has 0\\)"),
        (dict(tree_mask=[]), "tree_indptr counts 9 words, the tree_mask array holds 0"),
        (dict(tree_indptr=None, tree_mask=[]), "tree_mask is set but tree_indptr is not"),
    ]
    with ctx.tensor(q) as Q, ctx.tensor(k) as K:
        for table, cls in ((type_errors, TypeError), (overflows, OverflowError),
                           (errors, vkattn.Error)):
            for kw, match in table:
                kw = dict(dict(tree_indptr=indptr, tree_mask=words), **kw)
                with pytest.raises(cls, match=match):
                    vkattn.attention_varlen(Q, K, K, cu_q, cu_k, causal=True, **kw)
        # Any integer dtype holding values in range is exact (int64, object ints).
        want = vkattn.attention_varlen(Q, K, K, cu_q, cu_k, tree_indptr=indptr,
                                       tree_mask=words).numpy()
        got = vkattn.attention_varlen(Q, K, K, cu_q, cu_k, tree_indptr=indptr.astype(object),
                                      tree_mask=words.astype(np.int64)).numpy()
        assert np.array_equal(got, want)

        desc = vkattn.AttentionDesc(num_heads=h, num_kv_heads=hkv, head_dim=d, tree_indptr=indptr,
                                    tree_mask=words)
        for name, value, cls in (("tree_indptr", [], vkattn.Error),
                                 ("tree_indptr", [0, 2**31], OverflowError),
                                 ("tree_mask", [-1], OverflowError), ("tree_mask", "x", TypeError)):
            with pytest.raises(cls):
                desc[name] = value
        # The field reads back the tree the native desc holds, and the calls
        # use it (a failed set used to drop it there, leaving the field set).
        assert desc["tree_indptr"].tolist() == indptr.tolist()
        assert desc["tree_mask"].tolist() == words.tolist()
        out = vkattn.Tensor(ctx, (cu_q[-1], h, d))
        with pytest.raises(vkattn.Error, match="tree_indptr has 3 entries, the call needs 2"):
            ctx._handle().attentionVarlen(desc._native(), np.array([0, cu_q[-1]], np.int32),
                                          np.array([0, cu_k[-1]], np.int32), Q._handle(),
                                          K._handle(), K._handle(), out._handle())
        out.close()


def topk_case(rng, kk=8):
    """Two sequences, 3 queries over 40 keys and 1 over 25: an i32 top-k
    list [4, kk] (each row distinct random positions of its own sequence;
    the first row lists kk - 3 and pads with -1) and the bool mask that
    equals it (1-D, each sequence's t x u block row-major)."""
    ts, us = [3, 1], [40, 25]
    topk = np.full((sum(ts), kk), -1, np.int32)
    blocks, row = [], 0
    for t, u in zip(ts, us):
        block = np.zeros((t, u), np.uint8)
        for i in range(t):
            n = kk - 3 if row == 0 else kk
            topk[row, :n] = rng.choice(u, n, replace=False)
            block[i, topk[row, :n]] = 1
            row += 1
        blocks.append(block.reshape(-1))
    cu_q = np.concatenate(([0], np.cumsum(ts))).astype(np.int32)
    cu_k = np.concatenate(([0], np.cumsum(us))).astype(np.int32)
    return cu_q, cu_k, topk, np.concatenate(blocks)


@pytest.mark.parametrize("causal", [True, False])
def test_topk_lists_equal_their_bool_mask(ctx, causal):
    rng = np.random.default_rng(16)
    h, hkv, d = 4, 2, 16
    cu_q, cu_k, topk, mask = topk_case(rng)
    assert topk.shape == (4, 8) and (topk[0] == -1).sum() == 3 and mask.sum() == 8 * 4 - 3
    q = rand(rng, (cu_q[-1], h, d))
    k, v = rand(rng, (cu_k[-1], hkv, d)), rand(rng, (cu_k[-1], hkv, d))
    with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V, ctx.tensor(mask) as M:
        with ctx.tensor(topk) as T:
            got = vkattn.attention_varlen(Q, K, V, cu_q, cu_k, causal=causal,
                                          topk_indices=T).numpy()
        want = vkattn.attention_varlen(Q, K, V, cu_q, cu_k, causal=causal, mask=M,
                                       mask_type=vkattn.MASK_BOOL).numpy()
        with pytest.raises(vkattn.Error, match="AttentionDesc.topk_indices: this Tensor is closed"):
            vkattn.attention_varlen(Q, K, V, cu_q, cu_k, topk_indices=T)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_bad_topk_lists_raise(ctx):
    """A topk_indices that is not a Tensor is a TypeError; another dtype,
    another context, rank or first/middle dim is vkattn.Error naming it; a
    Tensor closed before or after it was stored raises, in a cache step
    too. K = 0 and out-of-range entries are valid lists (rows of 0)."""
    rng = np.random.default_rng(18)
    h, hkv, d = 4, 2, 16
    cu_q, cu_k, topk, _ = topk_case(rng)
    q, k = rand(rng, (cu_q[-1], h, d)), rand(rng, (cu_k[-1], hkv, d))
    rows, kk = topk.shape
    other = vkattn.Context()
    with ctx.tensor(q) as Q, ctx.tensor(k) as K:
        for value in (topk, topk.tolist(), "x", 5):
            with pytest.raises(TypeError, match="topk_indices must be a vkattn.Tensor or None"):
                vkattn.attention_varlen(Q, K, K, cu_q, cu_k, topk_indices=value)
        bad = [
            (ctx.tensor(topk.astype(np.float32)), "topk_indices must be i32, got f32"),
            (ctx.tensor(topk.astype(np.float16)), "topk_indices must be i32, got f16"),
            (ctx.tensor(topk.astype(np.uint8)), "topk_indices must be i32, got u8"),
            (other.tensor(topk), "topk_indices belongs to another context"),
            (ctx.tensor(topk.reshape(-1)),
             "must be \\[rows, K\\] or \\[rows, Hkv, K\\], got \\[32\\]"),
            (ctx.tensor(np.zeros((rows, hkv, 1, kk), np.int32)), "got \\[4, 2, 1, 8\\]"),
            (ctx.tensor(np.zeros((rows + 1, kk), np.int32)),
             "first dim is 5, must be the call's query tokens 4"),
            (ctx.tensor(np.zeros((rows - 1, hkv, kk), np.int32)), "first dim is 3"),
            (ctx.tensor(np.zeros((rows, hkv + 1, kk), np.int32)),
             "middle dim is 3, must be num_kv_heads 2"),
            (ctx.tensor(np.zeros((rows, h, kk), np.int32)),
             "middle dim is 4, must be num_kv_heads 2"),
        ]
        for t, match in bad:
            with t, pytest.raises(vkattn.Error, match=match):
                vkattn.attention_varlen(Q, K, K, cu_q, cu_k, topk_indices=t)
        far = np.where(np.arange(rows * kk).reshape(rows, kk) % 2, 2**31 - 1, -2**31)
        for lists in (np.zeros((rows, 0), np.int32), np.zeros((rows, hkv, 0), np.int32),
                      far.astype(np.int32)):
            with ctx.tensor(lists) as T:
                got = vkattn.attention_varlen(Q, K, K, cu_q, cu_k, topk_indices=T).numpy()
            assert not got.any()
        T = ctx.tensor(topk)
        desc = vkattn.AttentionDesc(num_heads=h, num_kv_heads=hkv, head_dim=d, topk_indices=T)
        T.close()  # stored, then closed
        with pytest.raises(vkattn.Error, match="AttentionDesc.topk_indices: this Tensor is closed"):
            desc._native()
        with pytest.raises(vkattn.Error, match="AttentionDesc.topk_indices: this Tensor is closed"):
            vkattn.AttentionDesc(topk_indices=T)  # closed, then stored
        with pytest.raises(vkattn.Error, match="AttentionDesc.topk_indices: this Tensor is closed"):
            ctx.self_check(num_heads=h, num_kv_heads=hkv, head_dim=d, topk_indices=T)
        with ctx.kv_cache(1, hkv, d, num_pages=4, page_size=16, dtype=vkattn.F32) as cache:
            with cache.begin([1], [1]) as step:
                step.append(0, k[:1], k[:1])
                with pytest.raises(vkattn.Error, match="topk_indices: this Tensor is closed"):
                    step.attention(0, q[:1], topk_indices=T)
    other.close()


def test_softcap_alibi_and_scale(ctx):
    rng = np.random.default_rng(2)
    t, u, h, d = 6, 11, 4, 16
    q, k, v = rand(rng, (t, h, d)), rand(rng, (u, h, d)), rand(rng, (u, h, d))
    slopes = np.array([0.5, 0.25, 0.125, 0.0625], np.float32)
    with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V, ctx.tensor(slopes) as A:
        got = vkattn.attention_varlen(Q, K, V, [0, t], [0, u], causal=True, softcap=2.0,
                                      scale=0.3, alibi_slopes=A).numpy()
    ro, _ = ref_attention(q, k, v, causal=True, scale=0.3, softcap=2.0, alibi=slopes)
    np.testing.assert_allclose(got, ro, atol=2e-5, rtol=0)


def test_sinks(ctx):
    # t > u with causal: rows 0 and 1 see no key (out 0, lse = sink).
    rng = np.random.default_rng(7)
    t, u, h, hkv, d = 6, 4, 4, 2, 16
    q, k, v = rand(rng, (t, h, d)), rand(rng, (u, hkv, d)), rand(rng, (u, hkv, d))
    sinks = np.array([-np.inf, 2.5, -1.0, 0.25], np.float32)
    with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V, \
            ctx.tensor(sinks) as S, ctx.tensor(np.zeros((t, h), np.float32)) as L:
        got = vkattn.attention_varlen(Q, K, V, [0, t], [0, u], causal=True, sinks=S,
                                      lse=L).numpy()
        lse = L.numpy()
        with ctx.tensor(sinks[:3]) as S3, pytest.raises(vkattn.Error, match="sinks has shape"):
            vkattn.attention_varlen(Q, K, V, [0, t], [0, u], sinks=S3)
    ro, rl = ref_attention(q, k, v, causal=True, sinks=sinks)
    np.testing.assert_allclose(got, ro, atol=2e-5, rtol=0)
    assert np.array_equal(np.isneginf(lse), np.isneginf(rl))
    fin = np.isfinite(rl)
    np.testing.assert_allclose(lse[fin], rl[fin], atol=1e-5, rtol=0)
    assert lse[0, 1] == np.float32(2.5) and np.all(got[0] == 0)


def test_closed_tensor_in_the_desc_raises_naming_the_field(ctx):
    q = np.zeros((2, 2, 8), np.float32)
    with ctx.tensor(q) as Q:
        for field, shape in (("lse", (2, 2)), ("sinks", (2,)), ("alibi_slopes", (2,))):
            t = ctx.tensor(np.zeros(shape, np.float32))
            t.close()
            with pytest.raises(vkattn.Error, match="AttentionDesc.%s: this Tensor is closed" % field):
                vkattn.attention_varlen(Q, Q, Q, [0, 2], [0, 2], causal=True, **{field: t})
        vkattn.attention_varlen(Q, Q, Q, [0, 2], [0, 2], causal=True).numpy()


def hf_inv_freq(dim, base, rope_type="default", factor=1.0, low_freq_factor=1.0,
                high_freq_factor=4.0, original_max_position=8192, beta_fast=32.0,
                beta_slow=1.0):
    """Hugging Face transformers' _compute_*_parameters (modeling_rope_utils),
    rewritten in numpy: (inv_freq, attention_factor)."""
    inv = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    if rope_type == "linear":
        return inv / factor, 1.0
    if rope_type == "llama3":
        low_wl = original_max_position / low_freq_factor
        high_wl = original_max_position / high_freq_factor
        wl = 2 * np.pi / inv
        out = np.where(wl > low_wl, inv / factor, inv)
        smooth = (original_max_position / wl - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed = (1 - smooth) * out / factor + smooth * out
        medium = ~(wl < high_wl) & ~(wl > low_wl)
        return np.where(medium, smoothed, out), 1.0
    if rope_type == "yarn":
        def corr(rot):
            return dim * np.log(original_max_position / (rot * 2 * np.pi)) / (2 * np.log(base))
        low, high = max(np.floor(corr(beta_fast)), 0), min(np.ceil(corr(beta_slow)), dim - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        extra = 1 - ramp
        return inv / factor * (1 - extra) + inv * extra, 0.1 * np.log(factor) + 1.0
    return inv, 1.0


def hf_rope(x, pos, inv, att, offset=0, interleaved=False):
    """x [n, h, d] rotated at positions pos [n] (rotate_half, or GPT-J pairs)."""
    x = np.array(x, np.float64)
    half = len(inv)
    ang = np.asarray(pos, np.float64)[:, None] * inv[None, :]
    c, s = (np.cos(ang) * att)[:, None, :], (np.sin(ang) * att)[:, None, :]
    r = x[..., offset:offset + 2 * half]
    if interleaved:
        a, b = r[..., 0::2].copy(), r[..., 1::2].copy()
        r[..., 0::2], r[..., 1::2] = a * c - b * s, b * c + a * s
    else:
        a, b = r[..., :half].copy(), r[..., half:].copy()
        r[..., :half], r[..., half:] = a * c - b * s, b * c + a * s
    return x


@pytest.mark.parametrize("kind", ["default", "linear", "llama3", "yarn"])
def test_rope_matches_hf_formulas(ctx, kind):
    rng = np.random.default_rng(9)
    n, h, d = 7, 3, 128
    x = rand(rng, (n, h, d))
    cu, starts = [0, 4, 7], [0, 9000]  # the second sequence is past Llama 3's 8192
    pos = [0, 1, 2, 3, 9000, 9001, 9002]
    kw = {"default": {}, "linear": dict(factor=4.0),
          "llama3": dict(factor=8.0, original_max_position=8192),
          "yarn": dict(factor=40.0, original_max_position=4096)}[kind]
    scaling = {"default": vkattn.ROPE_SCALING_NONE, "linear": vkattn.ROPE_SCALING_LINEAR,
               "llama3": vkattn.ROPE_SCALING_LLAMA3, "yarn": vkattn.ROPE_SCALING_YARN}[kind]
    base = 500000.0 if kind == "llama3" else 10000.0
    inv, att = hf_inv_freq(d, base, kind, **kw)
    want = hf_rope(x, pos, inv, att)
    with ctx.tensor(x) as X:
        got = vkattn.rope(X, cu, starts, out=X, theta=base, scaling=scaling, **kw).numpy()
    np.testing.assert_allclose(got, want, atol=3e-5, rtol=0)


def test_rope_partial_interleaved_and_cached_keys(ctx):
    # DeepSeek-style: GPT-J pairs over dims 512..575 of 576-wide rows.
    rng = np.random.default_rng(10)
    n, h, d = 3, 1, 576
    k, v = rand(rng, (n, h, d)), rand(rng, (n, h, 16))
    inv, att = hf_inv_freq(64, 10000.0)
    want = hf_rope(k, [0, 1, 2], inv, att, offset=512, interleaved=True)
    rope = vkattn.RopeDesc(layout=vkattn.ROPE_GPTJ, rotary_offset=512, rotary_dim=64)
    with ctx.kv_cache(num_layers=1, num_kv_heads=1, head_dim=d, head_dim_v=16, num_pages=4,
                      dtype=vkattn.F32) as cache:
        st = cache.begin([5], [n])
        st.append(0, k, v, rope=rope)
        st.commit()
        kr, vr = cache.read(0, 5, 0, n)
    np.testing.assert_allclose(kr.reshape(n, h, d), want, atol=3e-5, rtol=0)
    np.testing.assert_array_equal(vr.reshape(n, h, 16), v)
    with ctx.tensor(k) as K, pytest.raises(vkattn.Error, match="exceeds the head dim"):
        vkattn.rope(K, [0, n], [0], rotary_offset=520, rotary_dim=64)


def test_nan_beyond_valid_keys_stays_out(ctx):
    rng = np.random.default_rng(3)
    t, u, h, d = 4, 10, 2, 8
    q = rand(rng, (t, h, d))
    k, v = rand(rng, (u, h, d)), rand(rng, (u, h, d))
    # Window 2 hides keys 0..4 of every row: NaN there must not matter.
    k_bad, v_bad = k.copy(), v.copy()
    k_bad[:4], v_bad[:4] = np.nan, np.nan
    with ctx.tensor(q) as Q, ctx.tensor(k_bad) as K, ctx.tensor(v_bad) as V:
        got = vkattn.attention_varlen(Q, K, V, [0, t], [0, u], causal=True, window_left=2).numpy()
    ro, _ = ref_attention(q, k, v, causal=True, window_left=2)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ro, atol=2e-5, rtol=0)


def test_bool_mask_with_hidden_rows(ctx):
    rng = np.random.default_rng(4)
    t, u, h, d = 5, 7, 2, 8
    q, k, v = rand(rng, (t, h, d)), rand(rng, (u, h, d)), rand(rng, (u, h, d))
    mask = rng.integers(0, 2, (t, u)).astype(np.uint8)
    mask[2] = 0  # a fully hidden row: out 0, lse -inf
    lse_t = ctx.empty((t, h), vkattn.F32)
    with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V, ctx.tensor(mask.reshape(-1)) as M:
        got = vkattn.attention_varlen(Q, K, V, [0, t], [0, u], mask=M, lse=lse_t).numpy()
    lse = lse_t.numpy()
    lse_t.close()
    for i in range(t):
        ro, rl = ref_attention(q[i:i + 1], k, v, key_valid=mask[i])
        # One query row alone: its position is u - 1, no causal, so the same.
        np.testing.assert_allclose(got[i:i + 1], ro, atol=2e-5, rtol=0)
    assert (got[2] == 0).all() and np.isneginf(lse[2]).all()


def test_padded_with_left_padding(ctx):
    rng = np.random.default_rng(5)
    b, sq, sk, h, hkv, d = 2, 4, 6, 4, 1, 16  # MQA
    q, k, v = rand(rng, (b, sq, h, d)), rand(rng, (b, sk, hkv, d)), rand(rng, (b, sk, hkv, d))
    key_mask = np.ones((b, sk), np.int32)
    key_mask[1, :2] = 0  # left padding of the second sequence
    k[1, :2], v[1, :2] = np.nan, np.nan
    with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V:
        got = vkattn.attention_padded(Q, K, V, key_mask=key_mask, causal=True).numpy()
        nomask = vkattn.attention_padded(Q, K, V, causal=True)
        assert not np.isfinite(nomask.numpy()[1]).all()  # NaN keys visible: the mask mattered
        nomask.close()
    for i in range(b):
        ro, _ = ref_attention(q[i], np.nan_to_num(k[i]), np.nan_to_num(v[i]), causal=True,
                              key_valid=key_mask[i])
        np.testing.assert_allclose(got[i], ro, atol=2e-5, rtol=0)


def test_merge_of_two_key_halves_is_the_whole(ctx):
    rng = np.random.default_rng(6)
    t, u, h, d = 3, 20, 2, 8
    q, k, v = rand(rng, (t, h, d)), rand(rng, (u, h, d)), rand(rng, (u, h, d))
    parts = []
    for lo, hi in ((0, 12), (12, 20)):
        lse = ctx.empty((t, h), vkattn.F32)
        with ctx.tensor(q) as Q, ctx.tensor(k[lo:hi]) as K, ctx.tensor(v[lo:hi]) as V:
            parts.append((vkattn.attention_varlen(Q, K, V, [0, t], [0, hi - lo], lse=lse), lse))
    lse_out = ctx.empty((t, h), vkattn.F32)
    out, _ = vkattn.attention_merge(parts[0][0], parts[0][1], parts[1][0], parts[1][1],
                                    lse=lse_out)
    ro, rl = ref_attention(q, k, v)
    np.testing.assert_allclose(out.numpy(), ro, atol=2e-5, rtol=0)
    np.testing.assert_allclose(lse_out.numpy(), rl, atol=2e-5, rtol=0)
    for o, l in parts:
        o.close()
        l.close()
    out.close()
    lse_out.close()


@pytest.mark.parametrize("cache_dtype", [vkattn.F32, vkattn.F16])
def test_cache_steps_equal_one_varlen_call(ctx, cache_dtype):
    rng = np.random.default_rng(7)
    layers, h, hkv, d = 2, 4, 2, 16
    total = 0
    ks = {L: [] for L in range(layers)}
    vs = {L: [] for L in range(layers)}
    last = {}
    with ctx.kv_cache(layers, hkv, d, num_pages=8, page_size=4, dtype=cache_dtype) as cache:
        for tokens in (9, 5, 1, 1):  # a prompt in two chunks, then two decodes
            with cache.begin([42], [tokens]) as step:
                for L in range(layers):
                    kn, vn, q = rand(rng, (tokens, hkv, d)), rand(rng, (tokens, hkv, d)), rand(rng, (tokens, h, d))
                    step.append(L, kn, vn)
                    with step.attention(L, q, causal=True) as out:
                        last[L] = (q, out.numpy())
                    ks[L].append(kn)
                    vs[L].append(vn)
                step.commit()
                assert not step.active
            total += tokens
            assert cache.length(42) == total
        kr, vr = cache.read(0, 42)
        kall = np.concatenate(ks[0])
        if cache_dtype == vkattn.F32:
            assert np.array_equal(kr, kall)
        else:
            assert np.array_equal(kr, kall.astype(np.float16))
        for L in range(layers):
            kall = np.concatenate(ks[L]).astype(np.float16 if cache_dtype == vkattn.F16 else np.float32)
            vall = np.concatenate(vs[L]).astype(np.float16 if cache_dtype == vkattn.F16 else np.float32)
            q, got = last[L]
            ro, _ = ref_attention(q, kall, vall, causal=True)
            np.testing.assert_allclose(got, ro, atol=2e-5, rtol=0)
        cache.fork(42, 43)
        cache.truncate(43, 3)
        assert cache.length(43) == 3 and cache.length(42) == total
        cache.remove(43)
        assert cache.length(43) == 0


def e4m3_to_float(codes):
    """OCP e4m3fn bytes as float32 (numpy, independent of the C++ side)."""
    c = codes.astype(np.int32)
    e, m = (c >> 3) & 15, c & 7
    mag = np.where(e == 0, m / 512.0, (1 + m / 8.0) * np.exp2(e - 7.0))
    mag = np.where((e == 15) & (m == 7), np.nan, mag)
    return np.where(c & 0x80, -mag, mag).astype(np.float32)


def test_q4_cache_stores_codes_and_block_scales(ctx):
    rng = np.random.default_rng(4)
    hkv, d, dv, n = 2, 40, 64, 9  # d: a block and 8 elements
    k, v = rand(rng, (n, hkv, d)), rand(rng, (n, hkv, dv))
    with ctx.kv_cache(1, hkv, d, head_dim_v=dv, num_pages=4, page_size=4, dtype=vkattn.Q4) as cache:
        assert cache.dtype == vkattn.Q4
        with cache.begin([3], [n]) as step:
            step.append(0, k, v)
            step.commit()
        kc, vc = cache.read(0, 3)
        ks, vs = cache.read_block_scales(0, 3)
    assert kc.dtype == np.int8 and kc.shape == (n, hkv, d) and ks.shape == (n, hkv, 2)
    assert kc.min() >= -8 and kc.max() <= 7
    for x, c, s, dim in ((k, kc, ks, d), (v, vc, vs, dv)):
        block = np.arange(dim) // 32
        deq = c * s[:, :, block]
        # Each block's scale is its largest magnitude / -8 (to f16), and
        # every element within half a step of what was appended (a full
        # step, plus the f16 rounding of the scale, where +8 steps clamp to 7).
        for b in range(s.shape[2]):
            xb = x[:, :, block == b]
            m = np.take_along_axis(xb, np.abs(xb).argmax(axis=2)[:, :, None], axis=2)[:, :, 0]
            np.testing.assert_allclose(s[:, :, b], m / -8, rtol=1e-3)
        assert np.all(np.abs(deq - x) <= np.abs(s[:, :, block]) * 1.001 + 1e-7)


def hadamard(n):
    """The normalized Sylvester Hadamard matrix of order n (a power of two)."""
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def append_and_attend(cache, k, v, q):
    """k, v appended as sequence 3's first step, q attended (causal) in it;
    the output as numpy."""
    with cache.begin([3], [k.shape[0]]) as step:
        step.append(0, k, v)
        with step.attention(0, q, causal=True) as out:
            got = out.numpy()
        step.commit()
    return got


def test_q4_cache_with_rotated_keys(ctx):
    rng = np.random.default_rng(5)
    hkv, h, d, n = 2, 4, 64, 9
    k, v, q = rand(rng, (n, hkv, d)), rand(rng, (n, hkv, d)), rand(rng, (n, h, d))
    k[:, :, 5] *= 30  # an outlier channel
    with ctx.kv_cache(1, hkv, d, num_pages=4, page_size=4, dtype=vkattn.Q4,
                      rotate_keys=True) as cache:
        assert cache.rotate_keys
        got = append_and_attend(cache, k, v, q)
        kc, vc = cache.read(0, 3)
        ks, vs = cache.read_block_scales(0, 3)
    hd = hadamard(d)
    block = np.arange(d) // 32
    rot = k @ hd  # what the cache quantized
    kd = kc * ks[:, :, block]
    assert np.all(np.abs(kd - rot) <= np.abs(ks[:, :, block]) * 1.001 + 1e-6)
    # Attention sees the keys the codes stand for: rotated back (H is its
    # own inverse), with the caller's queries.
    want, _ = ref_attention(q, kd @ hd, vc * vs[:, :, block], causal=True)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
    with pytest.raises(vkattn.Error, match="VKATTN_Q4 caches only"):
        ctx.kv_cache(1, hkv, d, num_pages=4, dtype=vkattn.F16, rotate_keys=True)


@pytest.mark.parametrize("cache_dtype", ["i8", "fp8"])
def test_eight_bit_cache_dequantizes_to_what_attention_sees(ctx, cache_dtype):
    rng = np.random.default_rng(8)
    hkv, h, d, n = 2, 4, 16, 11
    dt = vkattn.I8 if cache_dtype == "i8" else vkattn.FP8_E4M3
    k, v, q = rand(rng, (n, hkv, d)), rand(rng, (n, hkv, d)), rand(rng, (n, h, d))
    with ctx.kv_cache(1, hkv, d, num_pages=4, page_size=4, dtype=dt) as cache:
        if dt == vkattn.FP8_E4M3:
            cache.set_scales(0, [1 / 224.0, 1 / 300.0], [1 / 250.0, 1 / 250.0])
        got = append_and_attend(cache, k, v, q)
        kc, vc = cache.read(0, 3)
        ks, vs = cache.read_scales(0, 3)
    if dt == vkattn.I8:
        assert kc.dtype == np.int8 and np.abs(kc.astype(int)).max() <= 127
        np.testing.assert_allclose(ks, np.abs(k).max(axis=2) / 127, rtol=1e-6)
        kd, vd = kc * ks[:, :, None], vc * vs[:, :, None]
    else:
        np.testing.assert_array_equal(ks, np.tile(np.float32([1 / 224.0, 1 / 300.0]), (n, 1)))
        np.testing.assert_array_equal(vs, np.full((n, hkv), np.float32(1 / 250.0)))
        kd, vd = e4m3_to_float(kc) * ks[:, :, None], e4m3_to_float(vc) * vs[:, :, None]
    step_of = (ks / 2)[:, :, None] if dt == vkattn.I8 else np.abs(k) / 16 + 1e-6
    assert np.all(np.abs(kd - k) <= step_of * 1.0001)
    ro, _ = ref_attention(q, kd, vd, causal=True)
    np.testing.assert_allclose(got, ro, atol=3e-5, rtol=0)


def test_cache_full_leaves_the_cache_as_it_was(ctx):
    with ctx.kv_cache(1, 1, 8, num_pages=2, page_size=4, dtype=vkattn.F32) as cache:
        free = cache.num_free_pages
        with pytest.raises(vkattn.Error) as e:
            cache.begin([1], [9])  # 3 pages wanted, 2 in the pool
        assert e.value.status == vkattn.ERROR_CACHE_FULL
        assert cache.num_free_pages == free and cache.length(1) == 0
        with cache.begin([1], [8]) as step:  # an open step leaving the block aborts
            step.append(0, np.zeros((8, 1, 8), np.float32), np.zeros((8, 1, 8), np.float32))
        assert cache.length(1) == 0 and cache.num_free_pages == free


def test_errors_carry_status_and_message(ctx):
    q = ctx.empty((4, 2, 8))
    k = ctx.empty((5, 2, 8))
    with pytest.raises(vkattn.Error) as e:
        vkattn.attention_varlen(q, k, k, [0, 4], [0, 6])
    assert e.value.status == vkattn.ERROR_INVALID_ARGUMENT
    assert "cu_seqlens_k" in e.value.message and e.value.status_name == "invalid argument"
    with pytest.raises(vkattn.Error) as e:
        q.write(np.zeros(8, np.float32))  # wrong element count
    assert "elements" in e.value.message
    with pytest.raises(vkattn.Error):
        q.write(np.zeros((4, 2, 8), np.int32))  # wrong element type
    with pytest.raises(TypeError):
        vkattn.attention_varlen(q, k, k, [0, 4], [0, 5], no_such_field=1)
    with pytest.raises(vkattn.Error) as e:
        ctx.empty((2, 3, 4, 5, 6))  # 5 dims
    assert e.value.status == vkattn.ERROR_INVALID_ARGUMENT
    q.close()
    with pytest.raises(vkattn.Error) as e:
        q.numpy()
    assert "closed" in e.value.message
    k.close()


def test_integer_arguments_are_exact_or_refused(ctx):
    """Every integer a caller gives is taken exactly or refused before the
    C call: floats (3.0 too), strings and None raise TypeError, values past
    the C type OverflowError; NumPy integers of any width are taken, bool
    arrays only where 0/1 is meant (key_mask)."""
    rng = np.random.default_rng(50)
    q, k = rand(rng, (4, 2, 8)), rand(rng, (4, 2, 8))
    want, _ = ref_attention(q, k, k, spans=[(0, 3)])
    with ctx.tensor(q) as Q, ctx.tensor(k) as K:
        # The review's cases: spans as floats, or past int32, no longer run as [0, 3).
        for spans, err in (([0.5, 3.7], TypeError), ([0, 2**32 + 3], OverflowError),
                           ([0, 3.0], TypeError), ([0, 2**70], OverflowError),
                           (["0", "3"], TypeError), ([0, None], TypeError)):
            with pytest.raises(err, match="spans"):
                vkattn.attention_varlen(Q, K, K, [0, 4], [0, 4], span_indptr=[0, 1], spans=spans)
        # Integer NumPy arrays of any width (and Python ints) are taken.
        for dt in (np.int8, np.uint16, np.int64, np.uint64):
            got = vkattn.attention_varlen(Q, K, K, np.array([0, 4], dt), np.array([0, 4], dt),
                                          span_indptr=np.array([0, 1], dt),
                                          spans=np.array([0, 3], dt)).numpy()
            np.testing.assert_allclose(got, want, atol=2e-5)
        for bad, err in (([0, 4.0], TypeError), ([0, 2**31], OverflowError),
                         (np.array([0, 4], np.uint64) + np.uint64(2**63), OverflowError),
                         ([False, True], TypeError), (None, TypeError), ("04", TypeError)):
            with pytest.raises(err, match="cu_seqlens_q"):
                vkattn.attention_varlen(Q, K, K, bad, [0, 4])
        # Scalar fields: NumPy integers are taken, floats and overflows refused.
        got = vkattn.attention_varlen(Q, K, K, [0, 4], [0, 4], window_left=np.int64(1),
                                      window_right=np.uint8(0)).numpy()
        np.testing.assert_allclose(got, ref_attention(q, k, k, window_left=1,
                                                      window_right=0)[0], atol=2e-5)
        for field, value, err in (("window_right", 3.7, TypeError), ("window_left", 3.0, TypeError),
                                  ("chunk_size", -1, OverflowError),
                                  ("window_right", 2**31, OverflowError),
                                  ("num_heads", None, TypeError), ("causal", "no", TypeError),
                                  ("causal", 2, ValueError), ("scale", "1", TypeError)):
            with pytest.raises(err, match=field):
                vkattn.attention_varlen(Q, K, K, [0, 4], [0, 4], **{field: value})
    # key_mask: bool arrays and integers of any width, never floats.
    qp, kp = rand(rng, (1, 3, 2, 8)), rand(rng, (1, 5, 2, 8))
    with ctx.tensor(qp) as Q, ctx.tensor(kp) as K:
        keep = np.array([[True, True, False, True, False]])
        want, _ = ref_attention(qp[0], kp[0], kp[0], key_valid=keep[0])
        for mask in (keep, keep.astype(np.int64), keep.astype(np.uint8).tolist()):
            np.testing.assert_allclose(vkattn.attention_padded(Q, K, K, mask).numpy()[0], want,
                                       atol=2e-5)
        for bad, err in ((keep.astype(np.float32), TypeError), ([[1, 1, 0, 1, 2**40]], OverflowError)):
            with pytest.raises(err, match="key_mask"):
                vkattn.attention_padded(Q, K, K, bad)
    # RoPE start positions, the cache's ids, layers and counts, tensor shapes.
    with ctx.tensor(q) as X:
        for bad, err in (([0.5], TypeError), ([2**31], OverflowError)):
            with pytest.raises(err, match="start_positions"):
                vkattn.rope(X, [0, 4], bad)
    for shape, err in (((2, 3.5), TypeError), ((2, 2**63), OverflowError), ("23", TypeError)):
        with pytest.raises(err, match="shape"):
            ctx.empty(shape)
    with ctx.kv_cache(num_layers=1, num_kv_heads=1, head_dim=8, num_pages=4) as cache:
        for ids, err in (([1.0], TypeError), ([2**63], OverflowError)):
            with pytest.raises(err, match="seq_ids"):
                cache.begin(ids, [1])
        with pytest.raises(OverflowError, match="num_new_tokens"):
            cache.begin([1], [2**32 + 1])
        with cache.begin(np.array([7], np.uint8), np.array([2], np.int16)) as step:
            with pytest.raises(TypeError, match="layer"):
                step.append(0.0, np.zeros((2, 1, 8), np.float32), np.zeros((2, 1, 8), np.float32))
            with pytest.raises(OverflowError, match="layer"):
                step.append(-1, np.zeros((2, 1, 8), np.float32), np.zeros((2, 1, 8), np.float32))
            step.append(np.int64(0), np.ones((2, 1, 8), np.float32), np.ones((2, 1, 8), np.float32))
            step.commit()
        assert cache.length(np.int32(7)) == 2
        for call in (lambda: cache.length(7.0), lambda: cache.truncate(7, 1.0),
                     lambda: cache.fork(7, "8"), lambda: cache.read(0, 7, 0.0)):
            with pytest.raises(TypeError):
                call()
        with pytest.raises(OverflowError, match="new_length"):
            cache.truncate(7, 2**31)
        with pytest.raises(vkattn.Error, match="negative"):
            cache.read(0, 7, start=3)
    # Constructor arguments: sizes, flags and dtypes.
    with pytest.raises(TypeError, match="num_pages"):
        ctx.kv_cache(num_layers=1, num_kv_heads=1, head_dim=8, num_pages=4.0)
    with pytest.raises(OverflowError, match="head_dim"):
        ctx.kv_cache(num_layers=1, num_kv_heads=1, head_dim=-8, num_pages=4)
    with pytest.raises(TypeError, match="rotate_keys"):
        ctx.kv_cache(num_layers=1, num_kv_heads=1, head_dim=8, num_pages=4, dtype=vkattn.Q4,
                     rotate_keys="yes")
    with pytest.raises(TypeError, match="validation"):
        vkattn.Context(validation="off")


def test_unknown_dtypes_name_vkattn_dtypes(ctx):
    """A dtype that is neither a vkattn dtype nor a NumPy one raises vkattn's
    own message (not NumPy's 'Cannot interpret')."""
    with pytest.raises(vkattn.Error, match="unknown dtype 99") as e:
        vkattn.KvCache(ctx, num_layers=1, num_kv_heads=1, head_dim=8, num_pages=4, dtype=99)
    assert e.value.status == vkattn.ERROR_INVALID_ARGUMENT
    with pytest.raises(vkattn.Error, match="unknown dtype -1"):
        ctx.empty((2,), dtype=-1)
    for bad in (3.0, "f17", None, True):
        with pytest.raises(TypeError, match="dtype"):
            ctx.empty((2,), dtype=bad)
    # Still taken: vkattn dtypes as NumPy integers, and NumPy dtypes.
    assert ctx.empty((2,), dtype=np.int32(vkattn.F16)).dtype == vkattn.F16
    assert ctx.empty((2,), dtype=np.float32).dtype == vkattn.F32


def test_dtypes_round_trip(ctx):
    rng = np.random.default_rng(8)
    for arr, dt in ((rand(rng, (3, 5)), None), (rand(rng, (3, 5), np.float16), None),
                    (rng.integers(-9, 9, (7,)).astype(np.int32), None),
                    (rng.integers(0, 255, (2, 2)).astype(np.uint8), None),
                    (rng.integers(0, 65535, (4,)).astype(np.uint16), vkattn.BF16)):
        with ctx.tensor(arr, dtype=dt) as t:
            back = t.numpy()
            assert back.dtype == arr.dtype and np.array_equal(back, arr)
            into = np.empty_like(arr)
            assert t.numpy(out=into) is into and np.array_equal(into, arr)


def test_gil_is_released_while_a_call_waits(ctx):
    """A thread blocked in a long native read leaves the interpreter to the
    others: the main thread never stalls for as long as the call waits (with
    the GIL held it would stall for the whole call)."""
    rng = np.random.default_rng(9)
    t = u = 2048
    q, k = rand(rng, (t, 8, 64)), rand(rng, (u, 8, 64))
    Q, K = ctx.tensor(q), ctx.tensor(k)
    ctx.synchronize()
    spinning = threading.Event()
    done = threading.Event()
    elapsed = []

    def worker():
        out = vkattn.attention_varlen(Q, K, K, [0, t], [0, u], causal=True)
        spinning.wait()  # the main thread is in its loop below
        t0 = time.perf_counter()
        ctx.synchronize()  # one native call: submit and wait
        elapsed.append(time.perf_counter() - t0)
        done.set()
        out.close()

    th = threading.Thread(target=worker)
    th.start()
    prev = time.perf_counter()
    stall = 0.0
    while not done.is_set():
        spinning.set()
        now = time.perf_counter()
        stall = max(stall, now - prev)
        prev = now
    th.join()
    Q.close()
    K.close()
    assert elapsed[0] > 0.05, "the call was too short to tell (%.3f s)" % elapsed[0]
    assert stall < elapsed[0] / 2, "main thread stalled %.3f s of a %.3f s call" % (stall, elapsed[0])


def test_batch_invariant_context_keeps_a_decodes_bits():
    """VKATTN_CONTEXT_BATCH_INVARIANT: a decode over 3000 keys gives the
    same bits alone and as the middle of a batch of decodes."""
    rng = np.random.default_rng(7)
    h, hkv, d = 8, 2, 64
    with vkattn.Context(validation=True, batch_invariant=True) as c:
        lens = [500, 3000, 1200]
        ks = [rand(rng, (u, hkv, d)) for u in lens]
        vs = [rand(rng, (u, hkv, d)) for u in lens]
        qs = [rand(rng, (1, h, d)) for _ in lens]

        def run(idx):
            q = np.concatenate([qs[i] for i in idx])
            k = np.concatenate([ks[i] for i in idx])
            v = np.concatenate([vs[i] for i in idx])
            cu_k = np.cumsum([0] + [lens[i] for i in idx])
            with c.tensor(q) as Q, c.tensor(k) as K, c.tensor(v) as V:
                o = vkattn.attention_varlen(Q, K, V, np.arange(len(idx) + 1), cu_k, causal=True)
                r = o.numpy()
                o.close()
            return r

        alone = run([1])[0]
        batch = run([0, 1, 2])[1]
        assert alone.tobytes() == batch.tobytes()
        assert c.validation_messages == 0



def test_self_check_replaces_a_faulted_family(tmp_path, monkeypatch):
    """VKATTN_FAULT_KERNEL=lanes: the up-front check finds lanes wrong and
    tiled right, records both, and a call is served right by tiled."""
    monkeypatch.setenv("VKATTN_PIPELINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("VKATTN_ATTN_KERNEL", "lanes")
    monkeypatch.setenv("VKATTN_FAULT_KERNEL", "lanes")
    c = vkattn.Context(validation=True)
    try:
        c.self_check(q_dtype=vkattn.F32, kv_dtype=vkattn.F32, query_tokens=5,
                     num_heads=4, num_kv_heads=2, head_dim=40, causal=True)
        res = c.self_check_results
        assert res["lanes"][1] >= 1 and res["tiled"][0] >= 1, res
        rng = np.random.default_rng(3)
        q = rng.standard_normal((5, 4, 40)).astype(np.float32)
        k = rng.standard_normal((9, 2, 40)).astype(np.float32)
        v = rng.standard_normal((9, 2, 40)).astype(np.float32)
        out = vkattn.attention_varlen(c.tensor(q), c.tensor(k), c.tensor(v), [0, 5], [0, 9],
                                      causal=True)
        want, _ = ref_attention(q, k, v, causal=True)
        np.testing.assert_allclose(out.numpy(), want, atol=1e-4)
        with pytest.raises(vkattn.Error):
            c.self_check(query_tokens=0, num_heads=4, num_kv_heads=2, head_dim=40)
        assert c.validation_messages == 0
    finally:
        c.close()


def test_tune_records_a_winner_that_a_later_context_uses(tmp_path, monkeypatch):
    """A tuning run on decode-16x512 reports the device table's choice
    first and one winner, and writes the device's tuning file."""
    monkeypatch.setenv("VKATTN_PIPELINE_CACHE_DIR", str(tmp_path))
    c = vkattn.Context(validation=True)
    try:
        rows = c.tune(seconds=2, cases="decode-16x512")
        assert rows[0][0] == "decode-16x512" and rows[0][1] == "-", rows
        assert [r for r in rows if r[1].startswith("winner: ")], rows
        files = list(tmp_path.glob("tuning-*.txt"))
        assert len(files) == 1 and "decode/d128" in files[0].read_text()
        with pytest.raises(vkattn.Error):
            c.tune(seconds=1, cases="no-such-case")
        # An empty pattern is a caller error, never "every case"; so is a
        # pattern the wrapper could not pass whole (a comma).
        for bad in ([""], ["decode-16x512", ""], ["a,b"]):
            with pytest.raises(ValueError):
                c.tune(seconds=1, cases=bad)
        # Below the Python layer, the shared SWIG wrapper refuses an empty
        # pattern in its list too, and takes patterns past 64 and 2 KiB
        # whole (the last one here matches no case: refused by name).
        with pytest.raises(vkattn.Error, match="empty"):
            c._handle().tune(1.0, "decode-16x512,,x")
        many = ",".join(["decode-16x512"] * 70 + ["z" * 3000])
        with pytest.raises(vkattn.Error, match="z" * 100):
            c._handle().tune(1.0, many)
        assert c.validation_messages == 0
    finally:
        c.close()


def test_messages_go_to_logging_and_to_a_handler(monkeypatch, caplog):
    """The library's messages reach the ``logging`` logger "vkattn" by
    default, and a handler set with set_log_handler instead; None gives
    them back to stderr. An unknown VKATTN_LOG category is a warning."""
    monkeypatch.setenv("VKATTN_LOG", "no-such-category-py1")
    with caplog.at_level("WARNING", logger="vkattn"):
        vkattn.Context().close()
    hits = [r for r in caplog.records if r.name == "vkattn" and "no-such-category-py1" in r.getMessage()]
    assert hits and hits[0].levelname == "WARNING", caplog.records
    got = []
    vkattn.set_log_handler(lambda level, message: got.append((level, message)))
    try:
        monkeypatch.setenv("VKATTN_LOG", "no-such-category-py2")
        vkattn.Context().close()
        # From another thread too (the handler takes the GIL there).
        monkeypatch.setenv("VKATTN_LOG", "no-such-category-py3")
        t = threading.Thread(target=lambda: vkattn.Context().close())
        t.start()
        t.join()
    finally:
        vkattn.set_log_handler()
    assert (vkattn.LOG_WARNING, got[0][1]) == got[0] and "no-such-category-py2" in got[0][1], got
    assert any("no-such-category-py3" in m for _, m in got), got
    assert all("\n" not in m and not m.startswith("vkattn: ") for _, m in got), got
    with pytest.raises(TypeError):
        vkattn.set_log_handler(42)


def test_a_raising_handler_does_not_break_the_call(monkeypatch):
    def bad(level, message):
        raise RuntimeError("handler failed")
    vkattn.set_log_handler(bad)
    try:
        monkeypatch.setenv("VKATTN_LOG", "no-such-category-py4")
        vkattn.Context().close()  # the warning's handler raised: reported, not propagated
    finally:
        vkattn.set_log_handler()


def test_a_failed_span_set_keeps_the_spans(ctx):
    """As for trees: a span set that raises leaves the spans the desc had
    (the native set used to free them first, so the next call ran without
    spans while the field still read them)."""
    desc = vkattn.AttentionDesc(num_heads=1, num_kv_heads=1, head_dim=8, span_indptr=[0, 1],
                                spans=[2, 5])
    with pytest.raises(vkattn.Error, match="span_indptr needs batch \\+ 1 >= 1 entries"):
        desc["span_indptr"] = []
    with pytest.raises(vkattn.Error, match="2 values per span"):
        desc["spans"] = [1, 2, 3]
    assert desc["span_indptr"].tolist() == [0, 1] and desc["spans"].tolist() == [2, 5]
    rng = np.random.default_rng(5)
    q, k = rand(rng, (6, 1, 8)), rand(rng, (6, 1, 8))
    with ctx.tensor(q) as Q, ctx.tensor(k) as K:
        got = vkattn.attention_varlen(Q, K, K, [0, 6], [0, 6], causal=True, span_indptr=[0, 1],
                                      spans=[2, 5]).numpy()
        out = vkattn.Tensor(ctx, (6, 1, 8))
        desc["causal"] = 1
        ctx._handle().attentionVarlen(desc._native(), np.array([0, 6], np.int32),
                                      np.array([0, 6], np.int32), Q._handle(), K._handle(),
                                      K._handle(), out._handle())
        assert np.array_equal(out.numpy(), got)
        out.close()


# Attention variants (user functions): a document mask and a score
# function in GLSL against the NumPy reference given the same rule.
VARIANT_SRC = """
bool vkattn_mask_mod(uint seq, uint head, int q_pos, int k_pos) {
  return vkattn_param_i32(0, uint(q_pos)) == vkattn_param_i32(0, uint(k_pos));
}
float vkattn_score_mod(float score, uint seq, uint head, int q_pos, int k_pos) {
  return score + vkattn_param_f32(1, head) * float(q_pos - k_pos);
}
"""


def test_variant_document_mask_and_score(ctx):
    rng = np.random.default_rng(7)
    h, hkv, d, t = 4, 2, 32, 50
    q, k, v = rand(rng, (t, h, d), np.float32), rand(rng, (t, hkv, d), np.float32), \
        rand(rng, (t, hkv, d), np.float32)
    doc = np.array([0] * 12 + [1] * 20 + [2] * 18, np.int32)
    slopes = (rng.standard_normal(h) * 0.05).astype(np.float32)
    with vkattn.Variant(ctx, VARIANT_SRC, param_dtypes=(vkattn.I32, vkattn.F32)) as var, \
            ctx.tensor(doc) as D, ctx.tensor(slopes) as S, ctx.tensor(q) as Q, \
            ctx.tensor(k) as K, ctx.tensor(v) as V:
        assert var.param_dtypes == (vkattn.I32, vkattn.F32, None, None)
        out = vkattn.attention_varlen(Q, K, V, [0, t], [0, t], causal=True, variant=var,
                                      variant_params=(D, S))
        got = out.numpy().astype(np.float64)
        out.close()
        # A declared slot left out is refused, naming it.
        with pytest.raises(vkattn.Error, match="variant_params\\[1\\] is NULL"):
            vkattn.attention_varlen(Q, K, V, [0, t], [0, t], causal=True, variant=var,
                                    variant_params=(D,))
    pos = np.arange(t)
    dist = (pos[:, None] - pos[None, :]).astype(np.float32)
    bias = slopes[:, None, None] * dist[None]  # (f32, as the shader computes it)
    ro, _ = ref_attention(q, k, v, causal=True, user_vis=doc[:, None] == doc[None, :],
                          user_bias=bias.astype(np.float64))
    np.testing.assert_allclose(got, ro, atol=2e-5, rtol=0)


def test_variant_errors(ctx):
    with pytest.raises(vkattn.Error, match="line [23]: error"):
        vkattn.Variant(ctx, "bool vkattn_mask_mod(uint s, uint h, int q, int k) {\n  return q >\n}")
    with pytest.raises(vkattn.Error, match="slot 0"):
        vkattn.Variant(ctx, "bool vkattn_mask_mod(uint s, uint h, int q, int k) {\n"
                       "  return vkattn_param_i32(0, uint(k)) > 0;\n}")
    with pytest.raises(vkattn.Error, match="param_dtypes"):
        vkattn.Variant(ctx, "bool vkattn_mask_mod(uint s, uint h, int q, int k) { return true; }",
                       param_dtypes=(vkattn.F16,))
    with pytest.raises(TypeError):
        vkattn.Variant(ctx, None)
    var = vkattn.Variant(ctx, "bool vkattn_mask_mod(uint s, uint h, int q, int k) { return true; }")
    var.close()
    with pytest.raises(vkattn.Error, match="closed"):
        vkattn.AttentionDesc(variant=var)

