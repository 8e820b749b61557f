from __future__ import annotations

from typing import TypedDict

from ._db import columns, connect, ident, tables


class TableInfo(TypedDict):
    name: str
    rows: int
    columns: list[str]


def list_tables() -> list[TableInfo]:
    """List the tables of the bundled database with their row counts and column names.

    The database holds stock_prices (daily open/high/low/close/volume of AAPL, FB, GOOG, IBM and
    MSFT, 2000-2013), airports (US airports with city and size) and routes (US airline routes
    between airports, July 2026). Use describe_table for column types and value ranges.

    Example: list_tables() -> [{'name': 'airports', 'rows': 514, 'columns': ['iata', ...]}, ...]
    """
    db = connect()
    try:
        return [
            {
                "name": name,
                "rows": db.execute(f"SELECT count(*) FROM {ident(name)}").fetchone()[0],
                "columns": [c["name"] for c in columns(db, name)],
            }
            for name in tables(db)
        ]
    finally:
        db.close()
