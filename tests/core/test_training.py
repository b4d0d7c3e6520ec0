"""The training loop: deterministic, equal to its serial twins (a hand-written GD step, one
process with the effective batch under DDP), and clear about what it cannot do."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.utils.data import DataLoader, TensorDataset

from course_utils.core import data, models, training
from course_utils.ranks.launch import launch


def _dataset(n=96, seed=0):
    g = torch.Generator().manual_seed(seed)
    return TensorDataset(torch.randn(n, 40, generator=g), torch.randint(0, 10, (n,), generator=g))


def _train(net, loader, **kwargs):
    """`training.train` with its settings given one by one: each goes to the Recipe, the
    Evaluation or the hooks that hold it."""
    recipe = {f.name for f in dataclasses.fields(training.Recipe)}
    evaluation = {f.name for f in dataclasses.fields(training.Evaluation)}
    return training.train(
        net,
        loader,
        training.Recipe(**{k: v for k, v in kwargs.items() if k in recipe}),
        training.Evaluation(**{k: v for k, v in kwargs.items() if k in evaluation}),
        **{k: v for k, v in kwargs.items() if k not in recipe | evaluation},
    )


def _run(seed=0, **kwargs):
    ds = _dataset()
    net = models.build("mlp", (40,), 10, hidden=16, seed=seed)
    loader = training.tensor_loader(ds, 8, seed=seed)
    options = dict(epochs=2, lr=0.1, val_loader=training.tensor_loader(ds, 32, shuffle=False))
    return _train(net, loader, seed=seed, **{**options, **kwargs}), net


def test_same_seed_same_history():
    (a, _), (b, _) = _run(seed=3), _run(seed=3)
    assert a.step_loss == b.step_loss
    assert a.epoch_train_loss == b.epoch_train_loss and a.epoch_val_acc == b.epoch_val_acc
    c, _ = _run(seed=4)
    assert c.step_loss != a.step_loss


def test_same_seed_same_history_with_a_plain_dataloader_and_adam():
    def run():
        net = models.build("mlp", (40,), 10, hidden=16, seed=0)
        loader = DataLoader(_dataset(), batch_size=8, shuffle=True)
        return training.train(
            net, loader, training.Recipe(epochs=2, lr=1e-3, optimizer="adam", seed=5)
        )

    assert run().step_loss == run().step_loss


def test_history_counts_and_is_plain_data():
    h, _ = _run()
    assert h.steps == 2 * 12 and h.samples == 2 * 96 and h.epochs == 2
    assert len(h.step_loss) == len(h.step_seconds) == h.steps
    assert len(h.epoch_train_loss) == len(h.epoch_val_loss) == len(h.epoch_seconds) == 2
    assert h.seconds > 0 and h.samples_per_second > h.steps_per_second > 0
    assert h.step_seconds == sorted(h.step_seconds)
    assert pickle.loads(pickle.dumps(h)).step_loss == h.step_loss
    assert set(h.as_dict()) >= {"step_loss", "test_acc", "samples_per_second"}


def test_full_batch_epoch_equals_one_hand_written_gd_step():
    ds = _dataset(n=32)
    net = models.build("mlp", (40,), 10, hidden=16, seed=0)
    twin = models.build("mlp", (40,), 10, hidden=16, seed=0)
    training.train(
        net, training.tensor_loader(ds, 32, shuffle=False), training.Recipe(epochs=1, lr=0.5)
    )
    x, y = ds.tensors
    torch.nn.functional.cross_entropy(twin(x), y).backward()
    with torch.no_grad():
        for p in twin.parameters():
            p -= 0.5 * p.grad
    pairs = zip(net.parameters(), twin.parameters(), strict=True)
    assert all(torch.allclose(p, q, atol=1e-6) for p, q in pairs)


def test_max_steps_stops_mid_pass_without_a_partial_epoch():
    h, _ = _run(epochs=1, max_steps=5)
    assert h.steps == 5 and h.epochs == 0 and h.epoch_train_loss == []
    h, _ = _run(epochs=3, max_steps=12)  # exactly one pass: it counts as an epoch
    assert h.steps == 12 and h.epochs == 1


def test_lr_schedule_is_a_factor_per_step():
    seen = []

    def warmup(step):
        seen.append(step)
        return 0.0 if step < 3 else 1.0

    ds = _dataset()
    net = models.build("mlp", (40,), 10, hidden=16, seed=0)
    start = [p.detach().clone() for p in net.parameters()]
    loader = training.tensor_loader(ds, 8, seed=0)
    training.train(net, loader, training.Recipe(epochs=1, max_steps=3, lr=0.1, lr_schedule=warmup))
    assert all(torch.equal(p, q) for p, q in zip(net.parameters(), start, strict=True))
    assert seen[:4] == [0, 1, 2, 3]
    training.train(
        net, loader, training.Recipe(epochs=1, max_steps=1, lr=0.1, lr_schedule=lambda step: 1.0)
    )
    assert not all(torch.equal(p, q) for p, q in zip(net.parameters(), start, strict=True))


def test_evaluation_points_and_loss_at():
    ds = _dataset()
    h, _ = _run(eval_loader=training.tensor_loader(ds, 96, shuffle=False), eval_every=5)
    assert h.eval_step == [0, 5, 10, 15, 20, 24]
    assert h.eval_samples == [8 * s for s in h.eval_step]
    assert h.loss_at(5, "updates") == h.eval_loss[1]
    assert min(h.eval_loss[1:3]) <= h.loss_at(7.5, "updates") <= max(h.eval_loss[1:3])
    assert h.loss_at(10_000, "samples") == h.eval_loss[-1]
    with pytest.raises(ValueError, match="axis"):
        h.loss_at(1, "epochs")


def test_threads_are_capped_for_the_call_only():
    before = torch.get_num_threads()
    seen = []
    _run(epochs=1, lr_schedule=lambda step: seen.append(torch.get_num_threads()) or 1.0, threads=1)
    assert set(seen) == {1}
    assert torch.get_num_threads() == before


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="epochs"):
        _run(epochs=0)
    with pytest.raises(ValueError, match="optimizer"):
        _run(optimizer="rmsprop")
    with pytest.raises(ValueError, match="eval_loader"):
        _run(eval_every=5)
    with pytest.raises(ValueError, match="batch_size"):
        training.tensor_loader(_dataset(), 0)
    with pytest.raises(TypeError, match="TensorDataset"):
        training.as_tensors([1, 2, 3])


@pytest.mark.parametrize("drop_last", [False, True])
def test_tensor_batches_are_a_dataloaders_batches_in_the_same_order(drop_last):
    ds = _dataset(n=50)
    samplers = (  # each a fresh one: a seeded RandomSampler moves on after every pass
        lambda: torch.utils.data.RandomSampler(ds, generator=torch.Generator().manual_seed(3)),
        lambda: torch.utils.data.DistributedSampler(ds, num_replicas=3, rank=1, seed=3),
    )
    for sampler in samplers:
        batches = torch.utils.data.BatchSampler(sampler(), 8, drop_last)
        expected = list(DataLoader(ds, sampler=batches, batch_size=None))
        loader = training.TensorBatches(ds, sampler(), 8, drop_last)
        got = list(loader)
        assert len(got) == len(loader) == len(expected)
        for (x, y), (want_x, want_y) in zip(got, expected, strict=True):
            assert torch.equal(x, want_x) and torch.equal(y, want_y)


def test_as_tensors_follows_a_random_split():
    ds = _dataset()
    part, _ = data.train_val_split(ds, 0.25, seed=0)
    flat = training.as_tensors(part)
    assert len(flat) == len(part) == 72
    assert torch.equal(flat.tensors[0][5], part[5][0])


def _ddp_vs_serial():
    """Two ranks with per-rank batch 8 and DDP against one process with batch 16."""
    ds = _dataset(n=64)
    net = torch.nn.parallel.DistributedDataParallel(models.build("mlp", (40,), 10, 16, seed=0))
    loader = data.shard_loader(ds, 8, shuffle=False)
    h = training.train(
        net, loader, training.Recipe(epochs=2, lr=0.2), training.Evaluation(val_loader=loader)
    )
    twin = models.build("mlp", (40,), 10, 16, seed=0)
    training.train(
        twin, training.tensor_loader(ds, 16, shuffle=False), training.Recipe(epochs=2, lr=0.2)
    )
    gap = max(
        (p - q).abs().max().item()
        for p, q in zip(net.module.parameters(), twin.parameters(), strict=True)
    )
    return gap, h.epoch_val_loss, h.steps, dist.get_rank()


def test_ddp_with_shard_loader_equals_one_process_with_the_effective_batch():
    results = launch(_ddp_vs_serial, 2, backend="gloo", timeout=60)
    (gap0, val0, steps0, _), (gap1, val1, steps1, _) = results
    assert gap0 < 1e-5 and gap1 < 1e-5
    assert steps0 == steps1 == 2 * 4
    assert val0 == pytest.approx(val1)  # metrics averaged over both ranks' shards


class _Sampler:
    def __init__(self):
        self.epochs = []

    def set_epoch(self, epoch):
        self.epochs.append(epoch)

    def __iter__(self):
        return iter(range(16))

    def __len__(self):
        return 16


def test_each_epoch_tells_the_sampler_which_it_is():
    sampler = _Sampler()
    loader = DataLoader(_dataset(n=16), batch_size=8, sampler=sampler)
    net = models.build("mlp", (40,), 10, hidden=8, seed=0)
    training.train(net, loader, training.Recipe(epochs=3, lr=0.1))
    assert sampler.epochs == [0, 1, 2]


def test_max_steps_without_epochs_goes_on_over_as_many_passes_as_needed():
    h, _ = _run(epochs=None, max_steps=30)  # 12 updates per pass
    assert h.steps == 30 and h.epochs == 2 and len(h.epoch_train_loss) == 2
    h, _ = _run(epochs=1, max_steps=30)  # an explicit epochs still ends the run
    assert h.steps == 12
    h, _ = _run(epochs=None)
    assert h.epochs == 1


def test_max_steps_refuses_a_loader_that_runs_dry():
    net = models.build("mlp", (40,), 10, hidden=8, seed=0)
    once = iter(training.tensor_loader(_dataset(), 8))
    with pytest.raises(ValueError, match="no batch in pass 2 before max_steps=20"):
        training.train(net, once, training.Recipe(max_steps=20))


def _pair(batch, **kwargs):
    """Train on one pass of `_dataset()` in order; return the History and the flat weights."""
    net = models.build("mlp", (40,), 10, hidden=16, seed=0)
    h = _train(net, training.tensor_loader(_dataset(), batch, shuffle=False), **kwargs)
    return h, torch.nn.utils.parameters_to_vector(net.parameters()).detach()


def test_accumulating_micro_batches_equals_one_large_batch():
    h, weights = _pair(8, accumulate=4, lr=0.3)
    twin, twin_weights = _pair(32, lr=0.3)
    assert h.steps == twin.steps == 3 and h.samples == twin.samples == 96
    assert torch.allclose(weights, twin_weights, atol=1e-6)
    assert h.step_loss == pytest.approx(twin.step_loss, abs=1e-6)


def test_after_backward_runs_once_per_update_before_the_step():
    calls = []

    def freeze(model):
        calls.append(all(p.grad is not None for p in model.parameters()))
        for p in model.parameters():
            p.grad.zero_()

    net = models.build("mlp", (40,), 10, hidden=16, seed=0)
    before = torch.nn.utils.parameters_to_vector(net.parameters()).detach().clone()
    loader = training.tensor_loader(_dataset(), 8, shuffle=False)
    h = training.train(net, loader, training.Recipe(accumulate=3, lr=0.5), after_backward=freeze)
    assert calls == [True] * h.steps and h.steps == 4
    assert torch.equal(torch.nn.utils.parameters_to_vector(net.parameters()), before)


def test_after_step_sees_every_applied_update_and_its_loss():
    seen = []
    net = models.build("mlp", (40,), 10, hidden=16, seed=0)
    loader = training.tensor_loader(_dataset(), 8, shuffle=False)
    h = training.train(
        net,
        loader,
        training.Recipe(max_steps=5, accumulate=2),
        after_step=lambda s, loss: seen.append((s, loss)),
    )
    assert seen == list(zip(range(1, 6), h.step_loss, strict=True))


def test_phase_clock_skips_the_warm_up_updates():
    h, _ = _pair(8, clock_after=4, accumulate=2)  # 6 updates of 16 samples
    p = h.phases
    assert p.steps == 2 and p.samples == 2 * 16
    assert p.forward > 0 and p.backward > 0 and p.optimizer > 0
    assert p.forward + p.backward + p.optimizer <= p.seconds <= h.seconds
    assert _pair(8)[0].phases is None
    assert _pair(8, clock_after=100)[0].phases.steps == 0


def test_bad_hook_arguments_are_refused():
    with pytest.raises(ValueError, match="accumulate must be >= 1"):
        _run(accumulate=0)
    with pytest.raises(ValueError, match="max_steps must be >= 1"):
        _run(max_steps=0)
    with pytest.raises(ValueError, match="after_backward must be a function"):
        _run(after_backward="average")
    with pytest.raises(ValueError, match="clock_after must be >= 0"):
        _run(clock_after=-1)


def _ddp_accumulating():
    """Two ranks, 2 micro-batches of 4 per update, against one process with batch 16."""
    ds = _dataset(n=64)
    net = torch.nn.parallel.DistributedDataParallel(models.build("mlp", (40,), 10, 16, seed=0))
    syncs = []

    def counting(state, bucket):
        syncs.append(1)
        return default_hooks.allreduce_hook(state, bucket)

    net.register_comm_hook(None, counting)
    loader = data.shard_loader(ds, 4, shuffle=False)
    h = training.train(net, loader, training.Recipe(epochs=2, accumulate=2, lr=0.2))
    twin = models.build("mlp", (40,), 10, 16, seed=0)
    training.train(
        twin, training.tensor_loader(ds, 16, shuffle=False), training.Recipe(epochs=2, lr=0.2)
    )
    gap = max(
        (p - q).abs().max().item()
        for p, q in zip(net.module.parameters(), twin.parameters(), strict=True)
    )
    return gap, h.steps, len(syncs)


def test_ddp_accumulation_syncs_once_per_update_and_equals_the_large_batch():
    for gap, steps, syncs in launch(_ddp_accumulating, 2, backend="gloo", timeout=60):
        assert gap < 1e-5
        assert steps == syncs == 2 * 4


def test_history_and_loaders_still_import_from_training():
    from course_utils.core import history, loaders
    from course_utils.core.training import History, as_tensors, tensor_loader, torch_threads

    assert History is history.History and torch_threads is training.torch_threads
    assert (as_tensors, tensor_loader) == (loaders.as_tensors, loaders.tensor_loader)
