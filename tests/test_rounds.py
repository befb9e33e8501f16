"""SentEval's rounds and early stopping (shared by the trainer, the regressor and the ranker) on known scores."""

import numpy as np

from embeval.train import rounds


def _replay(sequence, tenacity, passes_per_round=1, max_passes=100):
    """Run the loop on a fixed sequence of dev scores: (rounds run, improving rounds, best, passes)."""
    scores = iter(sequence)
    trained, kept = [], []
    stopping, passes = rounds.run(
        lambda running: trained.append(1),
        lambda: next(scores),
        lambda improved, stopping: kept.append(bool(improved)),
        (),
        tenacity,
        passes_per_round,
        max_passes,
    )
    return len(trained), [i for i, k in enumerate(kept) if k], float(stopping.best), passes


def test_strictly_greater_replaces_and_a_tie_counts_as_not_improving():
    assert _replay([0.5, 0.5, 0.6, 0.6, 0.6], tenacity=5, max_passes=4)[1] == [0, 2]


def test_tenacity_stops_at_the_first_non_improving_round_that_finds_the_counter_there():
    # tenacity 2: non-improving rounds 2 and 3 raise the counter to 2; round 4 finds it at 2 and stops
    assert _replay([0.1, 0.2, 0.1, 0.1, 0.1, 0.9], tenacity=2)[:3] == (5, [0, 1], 0.2)
    assert _replay([0.1, 0.0, 0.9], tenacity=0)[:2] == (2, [0])


def test_the_counter_is_never_reset_by_an_improvement():
    # tenacity 2: bad rounds 1 and 3 (counter 2, an improvement between them), round 5 stops
    assert _replay([0.1, 0.0, 0.2, 0.0, 0.3, 0.0, 0.9], tenacity=2)[:3] == (6, [0, 2, 4], 0.3)


def test_rounds_continue_while_no_more_than_max_passes_are_done():
    # 50 passes a round, max 1000: rounds start at 0, 50, ..., 1000 passes done, so 21 rounds
    n, improving, best, passes = _replay(np.arange(30) / 10, tenacity=3, passes_per_round=50, max_passes=1000)
    assert (n, passes, best) == (21, 1050, 2.0) and improving == list(range(21))


def test_a_grid_of_problems_stops_each_on_its_own():
    stopping = rounds.EarlyStopping((2,), tenacity=1)
    for scores in ([0.5, 0.5], [0.4, 0.6], [0.4, 0.7], [0.9, 0.8]):
        stopping.update(np.array(scores))
    assert stopping.stopped.tolist() == [True, False]
    assert stopping.best.tolist() == [0.5, 0.8] and stopping.rounds.tolist() == [3, 4]
    assert stopping.counter.tolist() == [2, 0]
