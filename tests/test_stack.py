"""embeval.evaluate.stack.run_together: jobs' fit calls answered together, on the calling thread."""

import threading

import pytest

from embeval.evaluate import stack


def test_run_together_fits_each_round_of_calls_together(monkeypatch):
    rounds = []

    def fake_fit_calls(calls):
        rounds.append([c["args"]["label"] for c in calls])
        assert threading.current_thread() is threading.main_thread()
        return [f"fitted {c['args']['label']}" for c in calls]

    monkeypatch.setattr(stack, "fit_calls", fake_fit_calls)
    runs = {"a": 0, "b": 0, "c": 0, "bad": 0}

    def job(name, count):
        def body(fit):
            runs[name] += 1
            got = [fit(label=f"{name}{i}") for i in range(count)]
            if name == "bad":
                raise ValueError("broken after its fit")
            return got

        return body

    outcomes = stack.run_together([job("a", 2), job("b", 1), job("c", 0), job("bad", 1)])
    assert rounds == [["a0", "b0", "bad0"], ["a1"]]
    assert outcomes[0] == (["fitted a0", "fitted a1"], None)
    assert outcomes[1] == (["fitted b0"], None)
    assert outcomes[2] == ([], None)
    assert isinstance(outcomes[3][1], ValueError) and outcomes[3][0] is None
    assert runs == {"a": 3, "b": 2, "c": 1, "bad": 2}  # run once per fit asked for, plus once to finish


def test_a_failing_fit_fails_every_job_that_asked_for_it(monkeypatch):
    def failing(calls):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(stack, "fit_calls", failing)
    outcomes = stack.run_together([lambda fit: fit(label="x"), lambda fit: fit(label="y"), lambda fit: "no fit"])
    assert [type(err) for _, err in outcomes[:2]] == [RuntimeError, RuntimeError]
    assert outcomes[2] == ("no fit", None)


def test_a_protocol_catching_exceptions_cannot_swallow_the_pause(monkeypatch):
    monkeypatch.setattr(stack, "fit_calls", lambda calls: ["answer"] * len(calls))

    def careful(fit):
        try:
            return fit(label="x")
        except Exception:  # noqa: BLE001
            pytest.fail("the pause at an unanswered fit reached the protocol's handler")

    assert stack.run_together([careful, careful]) == [("answer", None), ("answer", None)]


def test_held_tables_are_read_once_and_handed_out_as_copies(monkeypatch):
    from types import SimpleNamespace

    import numpy as np

    from embeval.run.execute import Workspace

    reads = []
    monkeypatch.setattr(Workspace, "_read_table", lambda self, unit, located: reads.append(unit) or np.arange(4.0))
    workspace = Workspace()
    unit = SimpleNamespace(source="enc0.h5", task="CR")
    with workspace.holding_tables():
        first = workspace.table(unit, None)
        first[:] = -1  # a run that normalizes its table in place
        second = workspace.table(unit, None)
    assert len(reads) == 1 and second.tolist() == [0.0, 1.0, 2.0, 3.0]
    workspace.table(unit, None)
    assert len(reads) == 2  # outside the block every call reads afresh
