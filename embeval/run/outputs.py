"""The results files of a run: OUT (written once, when the run is complete), OUT.partial after each
task (what --resume reads), the predictions sidecar, and the lock that keeps one writer per file."""

import logging
from pathlib import Path

from embeval._version import __version__
from embeval.errors import EmbevalError
from embeval.formats import atomic, predictions, targets
from embeval.formats.results import FORMAT, RESULTS, write_json
from embeval.untrusted import MAX_RECORD_BYTES, read_json

logger = logging.getLogger("embeval")


def _listed(names, limit=8):
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def load_previous(out):
    """The results record at `out` (None when there is none); anything else there is an error."""
    path = Path(out)
    if not path.exists():
        return None
    if path.is_dir():
        raise EmbevalError("is a folder; --out must name a results file", file=path)
    not_results = EmbevalError(
        "exists and is not an embeval results file; refusing to overwrite it (choose another --out)", file=path
    )
    record = read_json(path, MAX_RECORD_BYTES, invalid=lambda why: not_results, finite=True)
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("tasks"), dict):
        raise not_results
    return record


class ResultsFiles:
    """Where a run's results go. `out` is written once, when the run is complete; after each task the
    record so far goes to a progress file beside it (OUT.partial), which --resume reads and a complete
    run removes. So a run that fails or is interrupted never changes `out`, and keeps what finished.

    With predictions, OUT.predictions.npz (embeval.formats.predictions) is written just before `out` and
    named in it with its sha256; its progress file is OUT.predictions.npz.partial."""

    def __init__(self, out, save_predictions=False):
        self.out = Path(out)
        self.lock = atomic.WriterLock(self.out)
        self.progress = self.out.with_name(self.out.name + ".partial")
        self.sidecar = predictions.sidecar_path(self.out) if save_predictions else None
        self.sidecar_progress = self.sidecar.with_name(self.sidecar.name + ".partial") if self.sidecar else None
        self.saved = []
        self.write_failed = False

    def targets(self, option="--out"):
        """The files this run may write (embeval.formats.targets): OUT and OUT.partial, and the predictions."""
        found = [targets.Target(self.out, RESULTS, option), targets.Target(self.progress, RESULTS, option)]
        if self.sidecar:
            found += [
                targets.Target(path, predictions.PREDICTIONS, f"{option} (or --no-save-predictions)")
                for path in (self.sidecar, self.sidecar_progress)
            ]
        return found

    def check(self, resume=False, restart=False, inputs=()):
        """Before any work: writable, none of them an input (the vectors file, a task file), and nothing
        there that embeval did not write (a results file, its progress file, its predictions). Takes the
        writer lock (release() gives it back). Returns the earlier records (progress file first) a resume
        can reuse.

        A progress file left by a run that did not finish is kept unless `restart` says to discard it:
        without `resume` (which reuses it) the run is refused, naming what it holds."""
        atomic.check_writable(self.out)
        targets.check(self.targets(), inputs)
        self.lock.acquire()
        atomic.check_writable(self.progress)
        for path in (self.sidecar, self.sidecar_progress) if self.sidecar else ():
            atomic.check_writable(path)
        progress, out = load_previous(self.progress), load_previous(self.out)
        if progress is not None and not resume and not restart:
            finished = list(progress["tasks"])
            raise EmbevalError(
                f"holds the results of {_listed(finished) if finished else 'no task'} from an earlier run of "
                f"{self.out.name} that did not finish; add --resume to reuse them, or --restart to discard them",
                file=self.progress,
            )
        return [r for r in (progress, out) if r is not None]

    def sources(self):
        return [p for p in (self.progress, self.out) if p.exists()]

    def previous_predictions(self, record):
        """The predictions an earlier record (OUT's or OUT.partial's) names, under OUT's own names first
        (None when it has none or they cannot be read)."""
        saved = record.get("predictions")
        if not isinstance(saved, dict) or not isinstance(saved.get("file"), str):
            return None
        own = predictions.sidecar_path(self.out)
        try:
            return predictions.read_beside(self.out, saved, [own, own.with_name(own.name + ".partial")])
        except EmbevalError as err:
            logger.info(f"not reusing the saved predictions: {err}")
            return None

    def task_done(self, record, runs):
        if self.sidecar:
            self._predictions(self.sidecar_progress, record, runs)
        self._write(self.progress, record)
        self.saved = list(record["tasks"])

    def complete(self, record, runs):
        if self.sidecar:
            self._predictions(self.sidecar, record, runs)
        self._write(self.out, record)
        for path in (self.progress, self.sidecar_progress):
            try:
                if path is not None:
                    path.unlink()
            except OSError:
                pass

    def kept(self):
        """What a failed run leaves, in words."""
        if not self.saved:
            return f"{self.out} was not changed"
        return (
            f"{self.out} was not changed; the results of {_listed(self.saved)} are kept in {self.progress}; "
            "rerun with --resume to reuse them"
        )

    def _predictions(self, path, record, runs):
        try:
            sha = predictions.write(path, runs, {"embeval": __version__})
        except EmbevalError as err:
            self.write_failed = True
            raise EmbevalError(f"{err.message}; {self.kept()}", file=path)
        record["predictions"] = {"file": path.name, "sha256": sha}

    def _write(self, path, record):
        try:
            write_json(path, record)
        except EmbevalError as err:
            self.write_failed = True
            raise EmbevalError(f"{err.message}; {self.kept()}", file=path)

    def release(self):
        self.lock.release()
