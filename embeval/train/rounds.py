"""SentEval's rounds and early stopping, shared by the batched classifier trainer, the relatedness
regressor and the COCO ranker.

Training runs in rounds of `passes_per_round` passes while no more than `max_passes` passes are
done. After each round every running problem is scored on its early-stopping set: a strictly
greater score than its best so far replaces the best (the caller keeps that model); otherwise a
counter of non-improving rounds, never reset, stops the problem at the first non-improving round
that finds the counter at `tenacity`, and is incremented otherwise. Problems form a grid of any
shape (the trainer's (groups, regs); () for one model).
"""

import numpy as np


class EarlyStopping:
    """Best scores, counters and stop flags of a grid of problems."""

    def __init__(self, shape, tenacity, initial_best=-1.0):
        self.tenacity = tenacity
        self.best = np.full(shape, initial_best, dtype=np.float64)
        self.counter = np.zeros(shape, dtype=np.int64)
        self.stopped = np.zeros(shape, dtype=bool)
        self.rounds = np.zeros(shape, dtype=np.int64)

    @property
    def running(self):
        return ~self.stopped

    def update(self, scores):
        """Record a round's scores of every problem; returns where a running problem improved."""
        scores = np.asarray(scores, dtype=np.float64)
        running = ~self.stopped
        self.rounds += running
        improved = running & (scores > self.best)
        self.best = np.where(improved, scores, self.best)
        worse = running & ~improved
        self.stopped |= worse & (self.counter >= self.tenacity)
        self.counter += worse
        return improved


def run(train_round, score, keep_best, shape, tenacity, passes_per_round, max_passes):
    """Rounds until every problem stopped or more than max_passes passes are done.

    train_round(running) trains one round; score() gives the round's scores (shape);
    keep_best(improved, stopping) keeps the models of the problems that improved.
    Returns (EarlyStopping, passes done)."""
    stopping = EarlyStopping(shape, tenacity)
    passes = 0
    while not stopping.stopped.all() and passes <= max_passes:
        train_round(stopping.running)
        passes += passes_per_round
        improved = stopping.update(score())
        keep_best(improved, stopping)
    return stopping, passes
