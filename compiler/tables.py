"""Tables for notebooks: results as HTML (`_repr_html_`, which Jupyter shows) and as pandas
DataFrames (`to_frame()`, pandas being the table of the Python data ecosystem; an optional
dependency, imported when a frame is asked for)."""
from __future__ import annotations

import html
import importlib

from isa.errors import UserError

__all__ = ["html_table", "frame"]


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return html.escape("" if v is None else str(v))


def html_table(rows: list[dict], caption: str = "") -> str:
    """An HTML table of rows that share their keys (the columns, in the first row's order)."""
    if not rows:
        return f"<p>{html.escape(caption)}: no rows</p>"
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in cols) + "</tr>"
                   for r in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def frame(rows: list[dict]):
    """A pandas DataFrame of the rows; a clear error where pandas is not installed."""
    try:
        pandas = importlib.import_module("pandas")
    except ImportError:
        raise UserError("to_frame() needs pandas: pip install pandas", "to_frame()") from None
    return pandas.DataFrame(rows)
