"""Files in /workspace: list, read, write and search them. Paths outside are refused.

/workspace is the project's workspace folder, shared with the notebook's host, and the only
place in the sandbox where files can be written.
"""

from .list_files import list_files
from .read_file import read_file
from .search_files import search_files
from .write_file import write_file

__all__ = ["list_files", "read_file", "search_files", "write_file"]
