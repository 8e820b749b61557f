from __future__ import annotations

from typing import Any

from ._db import column_name, connect, ident, run, table_name


def top_n(table: str, by: str, n: int = 10, ascending: bool = False) -> list[dict[str, Any]]:
    """The n rows of a table with the largest values of a column (smallest with ascending=True).

    Example: top_n("stock_prices", by="volume", n=5) -> the five busiest trading days
    """
    db = connect()
    try:
        name = table_name(db, table)
        column = column_name(db, name, by)
    finally:
        db.close()
    order = "ASC" if ascending else "DESC"
    limit = max(1, min(int(n), 1000))
    sql = f"SELECT * FROM {ident(name)} ORDER BY {ident(column)} {order} LIMIT {limit}"
    return run(sql, (), limit)
