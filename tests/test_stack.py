"""embeval.evaluate.stack.run_together: evaluations' fit requests answered together, round by round,
on the calling thread; each evaluation's preparation runs once."""

import threading
from types import SimpleNamespace

from embeval.evaluate import stack


def request(label):
    return SimpleNamespace(label=label)


def test_run_together_fits_each_round_of_requests_together(monkeypatch):
    rounds = []

    def fake_fit_requests(requests):
        rounds.append([r.label for r in requests])
        assert threading.current_thread() is threading.main_thread()
        return [f"fitted {r.label}" for r in requests]

    monkeypatch.setattr(stack, "fit_requests", fake_fit_requests)
    prepared = {"a": 0, "b": 0, "c": 0, "bad": 0}

    def evaluation(name, count):
        prepared[name] += 1  # the preparation (features, folds) of a protocol
        got = []
        for i in range(count):
            got.append((yield request(f"{name}{i}")))
        if name == "bad":
            raise ValueError("broken after its fit")
        return got

    outcomes = stack.run_together([evaluation("a", 2), evaluation("b", 1), evaluation("c", 0), evaluation("bad", 1)])
    assert rounds == [["a0", "b0", "bad0"], ["a1"]]
    assert outcomes[0] == (["fitted a0", "fitted a1"], None)
    assert outcomes[1] == (["fitted b0"], None)
    assert outcomes[2] == ([], None)
    assert isinstance(outcomes[3][1], ValueError) and outcomes[3][0] is None
    assert outcomes[3][1].__traceback__ is not None  # kept for the sweep's log
    assert prepared == {"a": 1, "b": 1, "c": 1, "bad": 1}  # no evaluation is run again


def test_a_failing_fit_fails_every_evaluation_that_asked_for_it(monkeypatch):
    def failing(requests):
        raise RuntimeError("out of memory")

    def asks(label):
        yield request(label)
        return "unreachable"

    def no_fit():
        return "no fit"
        yield

    monkeypatch.setattr(stack, "fit_requests", failing)
    outcomes = stack.run_together([asks("x"), asks("y"), no_fit()])
    assert [type(err) for _, err in outcomes[:2]] == [RuntimeError, RuntimeError]
    assert outcomes[2] == ("no fit", None)


def test_an_evaluation_may_catch_its_own_exceptions_around_a_request(monkeypatch):
    monkeypatch.setattr(stack, "fit_requests", lambda requests: ["answer"] * len(requests))

    def careful():
        try:
            return (yield request("x"))
        except ValueError:
            return "handled"

    assert stack.run_together([careful(), careful()]) == [("answer", None), ("answer", None)]
