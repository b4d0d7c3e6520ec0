"""07's verdicts on parameter averaging, fed `local_sgd` runs as the notebook makes them
(the cpu profile's sizes). Each prints ✗ in a world without its effect: replicas from
different starts that meet only once, at the end, for averaging every H steps; replicas
from different starts for one average; from one start for the failed average."""

from __future__ import annotations

import pytest

from course_utils.core import data, profiles
from course_utils.param_server import verdicts
from course_utils.param_server.local_sgd import AveragingConfig, local_sgd
from course_utils.param_server.runs import evaluate, server_config

S = profiles.get("cpu").param_server
CFG = AveragingConfig(
    workers=S.workers, steps=S.averaging_steps, lr=S.averaging_lr, batch_size=S.batch_size,
    model=S.model, hidden=S.hidden, timeout=S.timeout,
)  # fmt: skip


@pytest.fixture(scope="module")
def mnist():
    return data.load(S.dataset)


def _accuracy(params, mnist) -> float:
    return evaluate(params, server_config(S), mnist)[1]


def test_averaging_every_h_keeps_up_unless_replicas_apart_meet_only_at_the_end(mnist, capsys):
    by_period = {h: _accuracy(local_sgd(CFG, mnist, h)["averaged"], mnist) for h in (1, 32)}
    assert verdicts.infrequent_averaging_keeps_up(by_period)
    apart = local_sgd(CFG, mnist, CFG.steps, same_start=False)
    by_period[CFG.steps] = _accuracy(apart["averaged"], mnist)
    assert not verdicts.infrequent_averaging_keeps_up(by_period)
    assert "✗ averaging every H steps stays within 6 points" in capsys.readouterr().out


def test_one_average_helps_from_one_start_and_fails_from_different_ones(mnist, capsys):
    for same_start in (True, False):
        run = local_sgd(CFG, mnist, None, same_start=same_start)
        averaged = _accuracy(run["averaged"], mnist)
        alone = [_accuracy(params, mnist) for params in run["own"]]
        assert bool(verdicts.one_average_beats_a_worker(averaged, alone)) is same_start
        assert bool(verdicts.different_starts_average_far_worse(averaged, alone)) is not same_start
    out = capsys.readouterr().out
    assert "✗ one average after training from one start" in out
    assert "✗ averaging models that started from different weights" in out
