"""vkattn against PyTorch (ctest -L torch; needs Debian's python3-torch,
1.13: no scaled_dot_product_attention, so the reference is explicit
softmax(Q K^T * scale + bottom-right causal mask) V in float64). Not run in
CI: fails, not skips, when torch is missing."""

import numpy as np
import pytest
import torch

import vkattn


def torch_attention(q, k, v, causal):
    """q [t, H, d], k/v [u, Hkv, *] (NumPy) -> [t, H, dv], bottom-right."""
    q, k, v = (torch.from_numpy(np.asarray(x, np.float64)) for x in (q, k, v))
    t, h, d = q.shape
    u, hkv, _ = k.shape
    k = k.repeat_interleave(h // hkv, dim=1)
    v = v.repeat_interleave(h // hkv, dim=1)
    s = torch.einsum("thd,uhd->htu", q, k) / d ** 0.5
    if causal:
        pos = torch.arange(t) + (u - t)
        hidden = torch.arange(u)[None, :] > pos[:, None]
        s = s.masked_fill(hidden[None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("htu,uhd->thd", p, v).numpy()


@pytest.mark.parametrize("t,u", [(16, 16), (5, 40), (1, 100)])
@pytest.mark.parametrize("causal", [False, True])
def test_varlen_matches_torch(t, u, causal):
    rng = np.random.default_rng(11)
    h, hkv, d = 8, 2, 64
    q = rng.standard_normal((t, h, d)).astype(np.float32)
    k = rng.standard_normal((u, hkv, d)).astype(np.float32)
    v = rng.standard_normal((u, hkv, d)).astype(np.float32)
    with vkattn.Context(validation=True) as ctx:
        with ctx.tensor(q) as Q, ctx.tensor(k) as K, ctx.tensor(v) as V:
            with vkattn.attention_varlen(Q, K, V, [0, t], [0, u], causal=causal) as out:
                got = out.numpy()
        assert ctx.validation_messages == 0
    np.testing.assert_allclose(got, torch_attention(q, k, v, causal), atol=1e-5, rtol=0)
