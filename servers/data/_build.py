"""Rebuild ``data.sqlite`` from the public-domain tables packaged in ``bokeh-sampledata``.

Run on the host, once, by a maintainer: ``pip install bokeh-sampledata==2026.1`` then
``python servers/data/_build.py``. The database is committed, so cemcp itself never needs the
package, and the sandbox reads the file read-only. The build is deterministic: same input
files, same rows in the same order.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import sqlite3
from importlib.resources import files
from pathlib import Path

TARGET = Path(__file__).with_name("data.sqlite")

SCHEMA = """
CREATE TABLE stock_prices (
    ticker TEXT NOT NULL,          -- AAPL, FB, GOOG, IBM or MSFT
    date TEXT NOT NULL,            -- trading day, ISO 8601 (YYYY-MM-DD)
    open REAL NOT NULL,            -- unadjusted prices in US dollars
    high REAL NOT NULL,
    low REAL NOT NULL,
    close REAL NOT NULL,
    volume INTEGER NOT NULL,       -- shares traded
    adj_close REAL NOT NULL,       -- close adjusted for splits and dividends
    PRIMARY KEY (ticker, date)
);
CREATE INDEX stock_prices_date ON stock_prices (date);
CREATE TABLE airports (
    iata TEXT PRIMARY KEY,         -- three-letter airport code
    name TEXT NOT NULL,
    city TEXT NOT NULL,
    country TEXT NOT NULL,
    latitude REAL NOT NULL,
    longitude REAL NOT NULL,
    altitude_ft INTEGER NOT NULL,
    size TEXT NOT NULL             -- large_airport, medium_airport or small_airport
);
CREATE TABLE routes (
    airline TEXT NOT NULL,         -- operating carrier, IATA code (e.g. WN, DL, AA)
    source TEXT NOT NULL,          -- origin airport, IATA code (see airports.iata)
    destination TEXT NOT NULL,     -- destination airport, IATA code
    stops INTEGER NOT NULL
);
CREATE INDEX routes_source ON routes (source);
"""


def _rows(name: str) -> list[dict[str, str]]:
    raw = (files("bokeh_sampledata") / "_data" / name).read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return list(csv.DictReader(io.StringIO(raw.decode("utf-8"))))


def build(target: Path = TARGET) -> str:
    tmp = target.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp)
    db.executescript(SCHEMA)
    db.executemany(
        "INSERT INTO stock_prices VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        sorted(
            (
                r["Ticker"],
                r["Date"],
                float(r["Open"]),
                float(r["High"]),
                float(r["Low"]),
                float(r["Close"]),
                int(r["Volume"]),
                float(r["Adj Close"]),
            )
            for r in _rows("stocks.csv.gz")
        ),
    )
    db.executemany(
        "INSERT INTO airports VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        sorted(
            (
                r["IATA"],
                r["Name"],
                r["City"],
                r["Country"],
                float(r["Latitude"]),
                float(r["Longitude"]),
                int(float(r["Altitude"])),
                r["Type"],
            )
            for r in _rows("airports.csv")
            if r["IATA"]
        ),
    )
    db.executemany(
        "INSERT INTO routes VALUES (?, ?, ?, ?)",
        sorted(
            (r["Airline"], r["Source"], r["Destination"], int(r["Stops"] or 0))
            for r in _rows("routes.csv.gz")
        ),
    )
    db.commit()
    db.execute("VACUUM")
    db.close()
    tmp.replace(target)
    return hashlib.sha256(target.read_bytes()).hexdigest()


if __name__ == "__main__":
    print(f"{TARGET.name}: sha256 {build()}")
