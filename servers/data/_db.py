"""The read-only connection every data tool uses, and checks of table and column names.

The database file sits next to this module (read-only inside the sandbox); it is opened with
``mode=ro&immutable=1``, ``PRAGMA query_only`` is on, and an authorizer refuses ATTACH, pragma
changes and extension loading, so no query can write anything or reach another file.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

DATABASE = Path(__file__).with_name("data.sqlite")
_READ_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "foreign_key_list"}
_COMMENT = re.compile(r"^[ \t]*([A-Za-z_]\w*)[ \t]+[A-Z]+[^-\n]*--[ \t]*(.+?)[ \t]*$", re.M)


def connect() -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{quote(str(DATABASE))}?mode=ro&immutable=1", uri=True)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA query_only = ON")
    db.set_authorizer(_authorize)
    return db


def _authorize(action: int, arg1: Any, arg2: Any, database: Any, trigger: Any) -> int:
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA and arg2 is not None and arg1 not in _READ_PRAGMAS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and arg2 == "load_extension":
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def run(sql: str, params: Any = (), max_rows: int = 1000) -> list[dict[str, Any]]:
    """Rows of one read-only statement as dicts; ValueError with the reason otherwise."""
    db = connect()
    try:
        cursor = db.execute(sql, params if params is not None else ())
        rows = cursor.fetchmany(max_rows + 1)
    except sqlite3.Error as exc:
        raise ValueError(f"SQL error: {exc}. Tables: {', '.join(tables(db))}.") from None
    finally:
        db.close()
    if len(rows) > max_rows:
        raise ValueError(
            f"the query returned more than {max_rows} rows: aggregate it, add LIMIT, "
            f"or pass a larger max_rows"
        )
    return [dict(row) for row in rows]


def tables(db: sqlite3.Connection) -> list[str]:
    found = db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    return [row[0] for row in found]


def table_name(db: sqlite3.Connection, table: str) -> str:
    known = tables(db)
    for name in known:
        if name.lower() == str(table).lower():
            return name
    raise ValueError(f"no table {table!r}; the tables are: {', '.join(known)}")


def columns(db: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    """name, type, not_null, primary_key and the schema's comment for each column."""
    sql = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    notes = dict(_COMMENT.findall(sql or ""))
    return [
        {
            "name": row["name"],
            "type": row["type"],
            "not_null": bool(row["notnull"]),
            "primary_key": bool(row["pk"]),
            "description": notes.get(row["name"], ""),
        }
        for row in db.execute(f"PRAGMA table_info({ident(table)})")
    ]


def column_name(db: sqlite3.Connection, table: str, column: str) -> str:
    known = [c["name"] for c in columns(db, table)]
    for name in known:
        if name.lower() == str(column).lower():
            return name
    raise ValueError(f"table {table} has no column {column!r}; its columns are: {', '.join(known)}")


def ident(name: str) -> str:
    """A checked name, quoted for SQL."""
    return '"' + name.replace('"', '""') + '"'
