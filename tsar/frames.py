"""Results as tables for notebooks: ``records()`` (a list of flat dicts), ``to_frame()`` (a pandas
DataFrame; pandas is the optional ``notebook`` extra) and ``_repr_html_`` (Jupyter renders the
result as an HTML table, with or without pandas)."""

from __future__ import annotations

import html
from typing import Any

from tsar.errors import UserError


class Tabular:
    """Mixin: subclasses define :meth:`records`."""

    def records(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def to_frame(self):
        """The records as a pandas DataFrame."""
        try:
            import pandas as pd
        except ImportError:
            raise UserError("to_frame() needs pandas: pip install 'tsar[notebook]'") from None
        return pd.DataFrame.from_records(self.records())

    def _repr_html_(self) -> str:
        rows = self.records()
        if not rows:
            return "<table></table>"
        cols = list(rows[0])
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(r.get(c)))}</td>" for c in cols)
                       + "</tr>" for r in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)
