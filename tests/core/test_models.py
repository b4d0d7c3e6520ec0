"""The course's models: right shapes, seeded weights, the global RNG left alone, clear errors."""

from __future__ import annotations

import pytest
import torch

from course_utils.core import models


@pytest.mark.parametrize(
    "name, shape",
    [("mlp", (40,)), ("cnn1d", (40,)), ("report_cnn", (3, 32, 32))],
)
def test_each_model_maps_a_batch_to_one_logit_per_class(name, shape):
    net = models.build(name, shape, 10, seed=0)
    assert net(torch.randn(5, *shape)).shape == (5, 10)
    assert sum(p.numel() for p in net.parameters()) > 0


def test_same_seed_same_weights_and_global_rng_untouched():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a = models.build("mlp", (40,), 10, hidden=16, seed=7)
    b = models.build("mlp", (40,), 10, hidden=16, seed=7)
    c = models.build("mlp", (40,), 10, hidden=16, seed=8)
    assert torch.equal(torch.random.get_rng_state(), before)
    pairs = list(zip(a.parameters(), b.parameters(), strict=True))
    assert all(torch.equal(p, q) for p, q in pairs)
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters(), strict=True))


def test_hidden_sets_the_width():
    net = models.build("mlp", (40,), 10, hidden=8)
    assert sum(p.numel() for p in net.parameters()) == 40 * 8 + 8 + 8 * 8 + 8 + 8 * 10 + 10


def test_unknown_model_and_bad_width_are_refused():
    with pytest.raises(ValueError, match="unknown model 'resnet'.*mlp"):
        models.build("resnet", (40,), 10)
    with pytest.raises(ValueError, match="hidden"):
        models.build("mlp", (40,), 10, hidden=0)
