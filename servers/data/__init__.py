"""A read-only SQLite database of public-domain data, queried inside the sandbox.

Tables: ``stock_prices`` (daily prices of AAPL, FB, GOOG, IBM and MSFT, 2000-2013),
``airports`` (US airports) and ``routes`` (US airline routes, July 2026). Sources and licences:
servers/data/README.md.
"""

from .describe_table import describe_table
from .list_tables import list_tables
from .query import query
from .summarize import summarize
from .top_n import top_n

__all__ = ["describe_table", "list_tables", "query", "summarize", "top_n"]
