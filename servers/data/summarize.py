from __future__ import annotations

from typing import Any, Literal

from ._db import column_name, connect, ident, run, table_name

_PERIODS = {"year": 4, "month": 7, "day": 10}


def summarize(
    table: str,
    by: str | list[str],
    value: str | None = None,
    func: Literal["count", "sum", "avg", "min", "max"] = "count",
    period: Literal["year", "month", "day"] | None = None,
    date_column: str = "date",
) -> list[dict[str, Any]]:
    """Group a table and aggregate one column: count, sum, avg, min or max per group.

    by names the grouping column(s); with period, rows are also grouped by the year, month or day
    of date_column (ISO text), returned as 'period'. The aggregate is named like 'avg_close' (or
    'count'). Rows come sorted by the groups.

    Example: summarize("stock_prices", by="ticker", value="close", func="avg", period="year")
    -> [{'ticker': 'AAPL', 'period': '2000', 'avg_close': 63.2}, ...]
    """
    if func not in ("count", "sum", "avg", "min", "max"):
        raise ValueError(f"func must be count, sum, avg, min or max, not {func!r}")
    db = connect()
    try:
        name = table_name(db, table)
        groups = [ident(column_name(db, name, c)) for c in ([by] if isinstance(by, str) else by)]
        value_name = column_name(db, name, value) if value else None
        target = ident(value_name) if value_name else None
        if period is not None:
            if period not in _PERIODS:
                raise ValueError(f"period must be year, month or day, not {period!r}")
            date = ident(column_name(db, name, date_column))
            groups.append(f"substr({date}, 1, {_PERIODS[period]}) AS period")
    finally:
        db.close()
    if func == "count":
        aggregate = f"count({target or '*'}) AS count"
    elif target is None:
        raise ValueError(f"{func} needs a value column to aggregate")
    else:
        aggregate = f"{func}({target}) AS {ident(f'{func}_{value_name}')}"
    keys = [g.split(" AS ")[-1] for g in groups]
    sql = (
        f"SELECT {', '.join(groups)}, {aggregate} FROM {ident(name)} "
        f"GROUP BY {', '.join(keys)} ORDER BY {', '.join(keys)}"
    )
    return run(sql, (), 10_000)
