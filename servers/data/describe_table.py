from __future__ import annotations

from typing import Any

from ._db import columns, connect, ident, table_name


def describe_table(table: str, sample_rows: int = 3) -> dict[str, Any]:
    """Describe one table: each column's type, meaning, distinct count and range, plus a sample.

    Returns {'table', 'rows', 'columns': [{'name', 'type', 'description', 'distinct', 'min',
    'max', 'nulls'}, ...], 'sample': [row, ...]}. Dates are ISO 8601 text (YYYY-MM-DD), so min
    and max of a date column are its first and last day.

    Example: describe_table("stock_prices")
    """
    db = connect()
    try:
        name = table_name(db, table)
        quoted = ident(name)
        out_columns = []
        for column in columns(db, name):
            col = ident(column["name"])
            distinct, low, high, nulls = db.execute(
                f"SELECT count(DISTINCT {col}), min({col}), max({col}), "
                f"sum({col} IS NULL) FROM {quoted}"
            ).fetchone()
            out_columns.append(
                {**column, "distinct": distinct, "min": low, "max": high, "nulls": nulls or 0}
            )
        count = db.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0]
        limit = max(0, min(int(sample_rows), 20))
        sample = [dict(r) for r in db.execute(f"SELECT * FROM {quoted} LIMIT ?", (limit,))]
        return {"table": name, "rows": count, "columns": out_columns, "sample": sample}
    finally:
        db.close()
