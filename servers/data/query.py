from __future__ import annotations

from typing import Any

from ._db import run


def query(
    sql: str, params: list[Any] | dict[str, Any] | None = None, max_rows: int = 1000
) -> list[dict[str, Any]]:
    """Run one read-only SQL statement (SQLite dialect) and return its rows as dicts.

    Use ? or :name placeholders with params rather than formatting values into the SQL. Writes,
    ATTACH and pragma changes are refused. More than max_rows rows is an error: aggregate in SQL
    or add LIMIT. Tables: stock_prices(ticker, date, open, high, low, close, volume, adj_close),
    airports(iata, name, city, country, latitude, longitude, altitude_ft, size),
    routes(airline, source, destination, stops).

    Example: query("SELECT ticker, max(close) AS best FROM stock_prices GROUP BY ticker")
    """
    return run(sql, params, max_rows)
