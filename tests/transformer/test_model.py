"""The chapter's transformer is deterministic, causal, and its parts are the ones the
parallel versions replace: attention in one function, the MLP a swappable submodule."""

from __future__ import annotations

import math

import torch
from torch import nn

from course_utils.core.sizes_model_parallel import TransformerSizes
from course_utils.transformer import model as M

SIZES = TransformerSizes(vocab=16, width=16, heads=4, blocks=2, seq_len=8, batch=2, steps=3)


def test_the_same_seed_builds_the_same_model_and_data():
    a, b = M.build(SIZES, seed=3), M.build(SIZES, seed=3)
    assert all(
        torch.equal(x, y)
        for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )
    assert not torch.equal(a.head.weight, M.build(SIZES, seed=4).head.weight)
    assert torch.equal(M.batches(SIZES, 2), M.batches(SIZES, 2))


def test_batches_are_arithmetic_sequences_mod_vocab():
    data = M.batches(SIZES, 2)
    assert data.shape == (2, SIZES.batch, SIZES.seq_len + 1)
    steps = (data[..., 1:] - data[..., :-1]) % SIZES.vocab
    assert (steps == steps[..., :1]).all()


def test_attention_is_causal_softmax_attention():
    q, k, v = torch.randn(3, 2, 3, 5, 4).unbind(0)
    scores = q @ k.transpose(-1, -2) / math.sqrt(4)
    scores = scores.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(M.attention(q, k, v), scores.softmax(-1) @ v)


def test_a_token_never_sees_the_future():
    model = M.build(SIZES)
    tokens = M.batches(SIZES, 1)[0, :, :-1]
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % SIZES.vocab
    torch.testing.assert_close(model(tokens)[:, :-1], model(changed)[:, :-1])


def test_the_mlp_can_be_replaced():
    model = M.build(SIZES)
    for block in model.blocks:
        block.mlp = nn.Identity()
    assert model(M.batches(SIZES, 1)[0, :, :-1]).shape == (SIZES.batch, SIZES.seq_len, SIZES.vocab)


def test_one_process_steps_is_a_reproducible_reference():
    a, b = M.one_process_steps(SIZES, 2), M.one_process_steps(SIZES, 2)
    assert len(a["losses"]) == 2 and a["losses"] == b["losses"]
    assert a["params"].keys() == M.build(SIZES).state_dict().keys()
    assert not torch.equal(a["params"]["head.weight"], M.build(SIZES).head.weight)
