"""Progress a person can see during a long task: on a terminal one line redrawn in place (a bar
when the stage's length is known), otherwise a plain line at most every `every` seconds, so that logs
of nohup or CI runs show the run is alive without filling up."""

import sys
import time

from embeval.evaluate.context import Progress

BAR = 20
EVERY_S = 30.0  # off a terminal, at most one line this often


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

    def stage(self, label, total=None, unit="round"):
        self.stages += 1
        self.label, self.total, self.unit = label, total, unit
        self.stage_started = self.clock()
        self._show(0, "", force=True)

    def step(self, done, detail=""):
        self._show(done, detail)

    def line(self, done, detail=""):
        """The progress line after `done` steps of the current stage."""
        now = self.clock()
        text = f"{self.task}: {self.label}"
        if self.total:
            if self.tty:
                filled = int(BAR * min(done, self.total) / self.total)
                text += f" [{'#' * filled}{'.' * (BAR - filled)}]"
            text += f" {self.unit} {done} of at most {self.total}"
        elif done:
            text += f" {self.unit} {done}"
        if detail:
            text += f", {detail}"
        text += f"; {duration(now - self.started)} elapsed"
        if self.total and done:
            left = (now - self.stage_started) / done * max(self.total - done, 0)
            text += f", at most {duration(left)} left in this stage"
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
