"""Progress a person can see during a long task: on a terminal one line redrawn in place (a bar
when the stage's length is known), otherwise a plain line at most every `every` seconds, so that logs
of nohup or CI runs show the run is alive without filling up.

Each stage is numbered and named (what it fits, with which classifier and normalization), so a count
that starts again belongs visibly to a new stage. The time left is the steps left at the rate
measured over the last RATE_WINDOW_S seconds (the whole stage while it is shorter), counted up to the
present moment: a bound at the present pace, since the steps are at most the stage's total (early
stopping ends sooner) and fewer fits train as they stop. Within a stage the bound shown only shrinks;
it is raised only when the pace has slowed (or the stage grew) beyond it, and the line then says so."""

import sys
import time

from embeval.evaluate.context import Progress

BAR = 20
EVERY_S = 30.0  # off a terminal, at most one line this often
RATE_WINDOW_S = 60.0  # the time left follows the progress rate of about this much recent time
SLACK = 0.1  # a new estimate within this fraction (and 5 s) over the bound shown keeps the bound


def duration(seconds):
    """'42 s', '3 min 05 s', '1 h 02 min'."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class TaskProgress(Progress):
    """The stages of one task, written to `stream`."""

    def __init__(self, task, stream=None, every=EVERY_S, tty=None, clock=time.monotonic):
        self.task = task
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.every = every
        self.clock = clock
        self.started = clock()
        self.stage_started = self.started
        self.last = None
        self.label, self.total, self.unit, self.stages = "", None, "round", 0
        self.drawn = 0
        self.history = [(self.started, 0)]  # (time, steps done) of the current stage
        self.deadline = None  # when the bound shown last says the stage ends
        self.revised = False  # the last bound was raised: the pace slowed, or the stage grew

    def stage(self, label, total=None, unit="round"):
        self.stages += 1
        self.label, self.total, self.unit = label, total, unit
        self.stage_started = self.clock()
        self.history = [(self.stage_started, 0)]
        self.deadline, self.revised = None, False
        self._show(0, "", force=True)

    def step(self, done, detail="", total=None):
        if total is not None:
            self.total = total
        now = self.clock()
        if done != self.history[-1][1]:
            self.history.append((now, done))
            cut = 0
            while cut + 1 < len(self.history) and self.history[cut + 1][0] <= now - RATE_WINDOW_S:
                cut += 1
            del self.history[:cut]  # the newest sample at least a window old stays the base
        self._show(done, detail)

    def seconds_left(self, now, done):
        """The stage's steps left at the recent rate: steps done since the newest sample at least
        RATE_WINDOW_S old (else the stage's start) over the time since then, up to now."""
        base_time, base_done = self.history[0]
        if done <= base_done or now <= base_time:
            base_time, base_done = self.stage_started, 0
        if done <= base_done or now <= base_time:
            return None
        return (now - base_time) / (done - base_done) * max(self.total - done, 0)

    def bound(self, now, done):
        """The seconds left to show: the estimate at the present pace, but never above the bound shown
        before in this stage unless the estimate exceeds it by more than the slack (self.revised)."""
        left = self.seconds_left(now, done) if self.total and done else None
        if left is None:
            return None
        kept = None if self.deadline is None else self.deadline - now
        if kept is not None and kept > 0 and left <= kept + max(5.0, SLACK * kept):
            self.revised = False
            if left < kept:
                self.deadline = now + left
            return min(left, kept)
        self.revised = kept is not None
        self.deadline = now + left
        return left

    def line(self, done, detail=""):
        """The progress line after `done` steps of the current stage."""
        now = self.clock()
        text = f"{self.task}, stage {self.stages}: {self.label}"
        if self.total:
            if self.tty:
                filled = int(BAR * min(done, self.total) / self.total)
                text += f" [{'#' * filled}{'.' * (BAR - filled)}]"
            text += f", {self.unit} {done} of at most {self.total}"
        elif done:
            text += f", {self.unit} {done}"
        if detail:
            text += f", {detail}"
        text += f"; {duration(now - self.started)} elapsed"
        left = self.bound(now, done)
        if left is not None:
            text += f", this stage ends within {duration(left)} at the present pace"
            if self.revised:
                text += " (raised: the pace slowed, or the stage grew)"
        return text

    def _show(self, done, detail, force=False):
        now = self.clock()
        if self.tty:
            if not force and self.last is not None and now - self.last < 0.2:
                return
            text = self.line(done, detail)
            self.stream.write("\r" + text.ljust(self.drawn))
            self.drawn = len(text)
        else:
            if not force and self.last is not None and now - self.last < self.every:
                return
            if force and self.last is not None and now - self.last < self.every and self.stages > 1:
                return
            self.stream.write(self.line(done, detail) + "\n")
        self.stream.flush()
        self.last = now

    def close(self):
        """Clear the redrawn line (terminal); nothing otherwise."""
        if self.tty and self.drawn:
            self.stream.write("\r" + " " * self.drawn + "\r")
            self.stream.flush()
            self.drawn = 0
