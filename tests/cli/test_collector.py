"""The garbage collector's thresholds: the tool's while a command or a worker's runs go on, the
caller's again after (a script that calls the tool in its own process keeps its own)."""
import gc

import pytest

from fractal.cli import main
from fractal.collector import COLLECTOR_THRESHOLDS, tuned_collector
from fractal.explore.evaluate import Job, run_job


@pytest.fixture
def callers_thresholds():
    before = gc.get_threshold()
    gc.set_threshold(123, 4, 5)
    yield (123, 4, 5)
    gc.set_threshold(*before)


def test_tuned_while_running_restored_after_even_on_error(callers_thresholds):
    with tuned_collector():
        assert gc.get_threshold() == COLLECTOR_THRESHOLDS
    assert gc.get_threshold() == callers_thresholds
    with pytest.raises(ZeroDivisionError), tuned_collector():
        1 / 0
    assert gc.get_threshold() == callers_thresholds


def test_a_command_run_in_process_leaves_the_callers_thresholds(callers_thresholds, monkeypatch):
    import fractal.cli as cli
    seen = []
    monkeypatch.setitem(cli.COMMANDS, "machines", lambda args, out: seen.append(
        gc.get_threshold()) or 0)
    assert main(["machines"]) == 0
    assert seen == [COLLECTOR_THRESHOLDS]
    assert gc.get_threshold() == callers_thresholds
    assert main(["no-such-command"]) != 0
    assert gc.get_threshold() == callers_thresholds


def test_a_workers_job_runs_tuned_and_leaves_the_callers_thresholds(callers_thresholds,
                                                                      monkeypatch):
    from fractal.explore import evaluate
    monkeypatch.setattr(evaluate.MEMO, "evaluate", lambda e: ("row", gc.get_threshold()))
    run = evaluate.Evaluation("k", "label", None, None)
    assert run_job(Job((run,))) == [("k", ("row", COLLECTOR_THRESHOLDS))]
    assert gc.get_threshold() == callers_thresholds
