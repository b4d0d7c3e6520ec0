"""01's verdicts on the 1/B law, fed `measure` as the notebook calls it (the cpu profile's
sample set, batch sizes and draws): they pass with independent draws, and print ✗ when the
batches are contiguous slices of a set sorted by label, a loader that forgot to shuffle."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import TensorDataset

from course_utils.core import data, models, profiles, training
from course_utils.sgd import gradient_noise

P = profiles.get("cpu")
S = P.sgd


@pytest.fixture(scope="module")
def setting():
    ds = data.load(P.dataset)
    train_set, _ = data.train_val_split(ds.train, S.val_fraction, seed=0)
    net = models.build(P.model, ds.input_shape, ds.num_classes, S.hidden, seed=0)
    return net, training.as_tensors(train_set)


def _measure(net, samples):
    return gradient_noise.measure(
        net, samples, S.noise_batch_sizes, draws=S.noise_draws, seed=0, threads=S.threads
    )


def _contiguous(samples: int, batch_size: int, generator) -> torch.Tensor:
    start = int(torch.randint(samples - batch_size + 1, (1,), generator=generator))  # cpu
    return torch.arange(start, start + batch_size)  # cpu: indices


def test_independent_draws_follow_the_law(setting, capsys):
    noise = _measure(*setting)
    assert gradient_noise.variance_follows_the_law(noise)
    assert gradient_noise.variance_falls_with_slope_minus_one(noise)
    assert capsys.readouterr().out.count("✓") == 2


def test_batches_of_an_unshuffled_set_do_not(setting, monkeypatch, capsys):
    net, samples = setting
    x, y = samples.tensors
    by_label = torch.argsort(y)
    monkeypatch.setattr(gradient_noise, "draw_batch", _contiguous)
    noise = _measure(net, TensorDataset(x[by_label], y[by_label]))
    assert max(noise.ratio_to_law) > 10 and noise.log_log_slope > -0.5
    assert not gradient_noise.variance_follows_the_law(noise)
    assert not gradient_noise.variance_falls_with_slope_minus_one(noise)
    out = capsys.readouterr().out
    assert "✗ at every batch size the measured variance" in out and "✗ on log-log axes" in out
