"""01's claim on its batch-size sweep, fed as the notebook feeds it (a grid sweep of the
default trial, one trial at a time, averaged per batch size): at one epoch budget the
largest batch ends worst, and a sweep that gives every batch the same number of updates
prints ✗."""

from __future__ import annotations

from course_utils import sgd
from course_utils.core import profiles
from course_utils.sgd import epoch_time
from course_utils.sgd.trials import train_trial

BATCHES = (32, 512)
GRID = {
    "algorithm": "grid",
    "parameters": {"batch_size": {"values": list(BATCHES)}, "seed": {"values": [0]}},
    "spec": {"metric": "val_loss", "objective": "minimize"},
}


def _ends(result) -> tuple[list[float], list[float]]:
    acc, loss = (result.mean_by("batch_size", m) for m in ("test_acc", "train_loss"))
    return [acc[b] for b in BATCHES], [loss[b] for b in BATCHES]


def same_updates_trial(batch_size: int, seed: int = 0) -> dict:
    """The slip: every batch trains for the updates the smallest makes in the profile's
    epochs, so the largest runs 16 times as many epochs."""
    epochs = profiles.current().sgd.epochs * batch_size // BATCHES[0]
    return train_trial(batch_size=batch_size, seed=seed, epochs=epochs)


same_updates_trial.metrics = train_trial.metrics


def test_at_one_epoch_budget_the_largest_batch_ends_worst(capsys):
    assert epoch_time.largest_batch_ends_worst(*_ends(sgd.run_sweep(GRID, jobs=1)))
    out = capsys.readouterr().out
    assert "✓ at a fixed lr and epoch budget, the largest batch ends worst" in out


def test_at_one_update_budget_the_largest_batch_does_not_end_worst(capsys):
    test_acc, train_loss = _ends(sgd.run_sweep(GRID, jobs=1, trial=same_updates_trial))
    assert train_loss[-1] < train_loss[0]  # as many updates, more samples in each: lower
    assert not epoch_time.largest_batch_ends_worst(test_acc, train_loss)
    assert "✗ at a fixed lr and epoch budget" in capsys.readouterr().out
