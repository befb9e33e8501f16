"""The table model every report format renders: cells and tables."""
from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class Cell:
    """A figure in the table's units (None: not scored) with its interval, or a text."""

    value: Optional[float] = None
    low: Optional[float] = None
    high: Optional[float] = None
    text: Optional[str] = None
    mark: bool = False  # a published figure computed differently from the column (explained in the table's notes)


@dataclass
class Table:
    key: str
    title: str
    caption: str
    header: List[str]
    rows: List[List[Cell]] = field(default_factory=list)
    metrics: List[str] = field(default_factory=list)  # per column after the encoder and dim: what the figure is
    # per column after the encoder and dim: how its figures are computed (task, metric, protocol, classifier,
    # aggregation, split, vectors), for placing published figures beside them; None: no such figure
    columns: List[Optional[dict]] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)  # printed under the table
