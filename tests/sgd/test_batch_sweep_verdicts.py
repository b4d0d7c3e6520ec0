"""01's claims on its batch-size sweep, fed as the notebook feeds them (a grid sweep of the
default trial, averaged per batch size): at one epoch budget the largest batch ends worst,
and a sweep that gives every batch the same number of updates prints ✗; the smallest batch
takes longest per epoch, and a sweep whose trials all train on one batch size prints ✗."""

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


def same_batch_trial(batch_size: int, seed: int = 0) -> dict:
    """The slip: the trial ignores the batch size its config gives it and trains on the
    largest, so every "batch size" of the sweep runs the same work."""
    return train_trial(batch_size=max(BATCHES), seed=seed)


same_batch_trial.metrics = train_trial.metrics


def test_epoch_time_verdicts_fail_for_a_sweep_whose_trials_ignore_their_batch(capsys):
    """01's two epoch-time ratios, from the notebook's sweep one at a time and 4 at a time:
    where the batches are in fact alike, neither ratio comes near its threshold."""
    grid = {**GRID, "parameters": {**GRID["parameters"], "seed": {"values": [0, 1]}}}

    def factor(jobs: int) -> float:
        result = sgd.run_sweep(grid, jobs=jobs, trial=same_batch_trial)
        return epoch_time.ratio(result.mean_by("batch_size", "seconds_per_epoch"))

    assert not epoch_time.slower_alone(factor(1))
    assert not epoch_time.slower_side_by_side(factor(4), 4)
    out = capsys.readouterr().out
    assert "✗ real clock: timed alone, the smallest batch takes over 4x" in out
    assert "✗ real clock: as in the report, with 4 trials at a time" in out
