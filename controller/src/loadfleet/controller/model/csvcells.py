"""CSV cells that a spreadsheet opens as data, never as a formula.

Request names, target URLs, agent ids, host and counter names come from plans and agents, and
run directories are opened in spreadsheets. A text cell that begins with `=`, `+`, `-`, `@`, a
tab or a carriage return is a formula to Excel, LibreOffice and Google Sheets (OWASP's "CSV
injection"): `=HYPERLINK(...)` as a request name would be a live link in `intervals.csv`.

Such a cell is written with a leading `'`, which spreadsheets read as "this is text" and do not
show; a cell that begins with `'` itself gets one too, so `read_cell` gives back exactly what
was written (the escape is reversible, and loadfleet's own readers see the true names).
Numbers are never touched: a negative number stays a number.
"""

from __future__ import annotations

from collections.abc import Iterable

# What starts a formula in the common spreadsheets, and the escape itself.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ESCAPE = "'"


def text_cell(text: str) -> str:
    """`text` as a cell no spreadsheet evaluates."""
    return ESCAPE + text if text.startswith((*_FORMULA_STARTS, ESCAPE)) else text


def safe_row(values: Iterable[object]) -> list[object]:
    """A row for csv.writer with every text cell escaped (numbers and empty cells as they are)."""
    return [text_cell(v) if isinstance(v, str) else v for v in values]


def read_cell(cell: str) -> str:
    """A text cell as it was before `text_cell`."""
    return cell[1:] if cell.startswith(ESCAPE) else cell
