"""Reference solutions for notebook 09's exercises (the tests run the checkers on them)."""

import torch


def resume(model, optimizer, batches, saved):
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])  # momentum: without it the next steps differ
    batches.load_state_dict(saved["sampler"])  # the epoch and the batches already taken
    torch.set_rng_state(saved["rng"])  # this rank's noise goes on where it stopped
    return saved["step"]


def slowest_rank(table):
    # Every rank's step lasts as long (they all wait for the slowest); the slow rank is
    # the one that spends the most of it working rather than waiting.
    return max(table, key=lambda r: table[r]["step"] - table[r]["wait"])
