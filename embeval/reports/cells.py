"""The table model every report format renders: cells and tables."""

from dataclasses import dataclass, field

TABLE_FORMATS = ("markdown", "latex", "csv")  # embeval report's text formats
COMPARE_FORMATS = ("text",) + TABLE_FORMATS  # embeval compare's
RANK_FORMATS = ("text", "markdown", "html")  # embeval rank's


@dataclass
class Cell:
    """A figure in the table's units (None: not scored) with its interval, or a text."""

    value: float | None = None
    low: float | None = None
    high: float | None = None
    text: str | None = None
    mark: bool = False  # a published figure computed differently from the column (explained in the table's notes)
    undefined: bool = False  # scored, but the figure has no value (a correlation of constant scores): "n/a"


@dataclass
class Table:
    key: str
    title: str
    caption: str
    header: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)  # per column after the encoder and dim: what the figure is
    # per column after the encoder and dim: how its figures are computed (task, metric, protocol, classifier,
    # aggregation, split, vectors), for placing published figures beside them; None: no such figure
    columns: list[dict | None] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # printed under the table
