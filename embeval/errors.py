"""The one error type users see: a single line naming the file, the task and what is wrong."""

EXIT_BAD_INPUT = 2  # every error of the user's input: one line on stderr, this exit code

# The name embeval is published under on PyPI (`embeval` there is another project); the command and
# the import are `embeval`.
DISTRIBUTION = "embeval-offline"


def install_hint(*extras: str) -> str:
    """The command that installs embeval with these extras, as every message and help text quotes it:
    install_hint("ray") -> "pip install 'embeval-offline[ray]'"."""
    return f"pip install '{DISTRIBUTION}[{','.join(extras)}]'" if extras else f"pip install {DISTRIBUTION}"


DATA_HINT = (
    "get the data with `embeval data fetch --data DIR`, or point --data / EMBEVAL_DATA "
    "at an existing SentEval data/ folder"
)
# What to do when the download server cannot be reached while fetching data on the user's behalf.
UNREACHABLE_HINT = (
    "check the network and run again, fetch from a reachable mirror with --mirror URL (or EMBEVAL_MIRROR; "
    "see `embeval docs data`), or point --data / EMBEVAL_DATA at an existing SentEval data/ folder"
)


class EmbevalError(Exception):
    """A problem with the user's input, reported as one line and exit code 2."""

    def __init__(self, message: str, file: object = None, task: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = None if file is None else str(file)
        self.task = task
        self.line = line

    def __str__(self) -> str:
        parts = []
        if self.file is not None:
            parts.append(self.file if self.line is None else f"{self.file}:{self.line}")
        if self.task is not None:
            parts.append(self.task)
        parts.append(" ".join(self.message.split()))
        return ": ".join(parts)


class DataFileError(EmbevalError):
    """A task data file is missing or malformed."""


class VectorsError(EmbevalError):
    """The vectors file is missing, unreadable or does not match the task data."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception while a command runs, so that it stops as on Ctrl-C: what finished is
    kept, locks are released, and one line says so (exit code 143)."""
