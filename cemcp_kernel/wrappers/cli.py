"""``python -m cemcp_kernel servers ...``: the command-line face of :mod:`.manage`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import load_settings
from ..errors import McpServerError
from . import manage

_ADD_EXAMPLES = """examples:
  python -m cemcp_kernel servers add time -- mcp-server-time --local-timezone UTC
  python -m cemcp_kernel servers add everything -- npx -y @modelcontextprotocol/server-everything
  python -m cemcp_kernel servers add docs --url https://example.org/mcp --header "Authorization=Bearer TOKEN"

Literal --env and --header values are written to the project's .env, never to server.json."""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    servers = commands.add_parser(
        "servers", help="live MCP servers in the tool tree: add, import, refresh, list, remove"
    )
    sub = servers.add_subparsers(dest="servers_command", required=True)

    add = sub.add_parser(
        "add",
        help="connect to a server and write a typed wrapper per tool",
        epilog=_ADD_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add.add_argument("name", help="folder under servers/ (a Python identifier)")
    add.add_argument(
        "server_command", nargs="*", metavar="COMMAND", help="after --: the command that starts it"
    )
    add.add_argument("--url", help="a streamable HTTP server instead of a command")
    add.add_argument("--header", action="append", default=[], metavar="K=V")
    add.add_argument("--env", action="append", default=[], metavar="K=V")
    add.set_defaults(func=_add)

    imp = sub.add_parser("import", help='add every server of an {"mcpServers": ...} JSON file')
    imp.add_argument("file", type=Path)
    imp.add_argument("--only", action="append", help="import only this server (repeatable)")
    imp.set_defaults(func=_import)

    ref = sub.add_parser("refresh", help="regenerate wrappers from the live server")
    ref.add_argument("names", nargs="*", help="servers to refresh (default: every live one)")
    ref.set_defaults(func=_refresh)

    lst = sub.add_parser("list", help="the tool tree's servers and how they are reached")
    lst.set_defaults(func=_list)

    rm = sub.add_parser("remove", help="delete a server's generated wrappers and server.json")
    rm.add_argument("name")
    rm.set_defaults(func=_remove)


def _add(args: argparse.Namespace) -> int:
    settings = load_settings()
    config = manage.config_from_args(args.server_command, args.url, args.header, args.env)
    print(manage.add(settings, args.name, config).text())
    return 0


def _import(args: argparse.Namespace) -> int:
    settings = load_settings()
    failed = 0
    for result in manage.import_file(settings, args.file, args.only):
        if isinstance(result, McpServerError):
            failed += 1
            print(f"not imported: {result}")
        else:
            print(result.text())
    return 1 if failed else 0


def _refresh(args: argparse.Namespace) -> int:
    settings = load_settings()
    names = args.names or [
        e.name for e in manage.list_servers(settings) if e.kind in ("stdio", "http")
    ]
    failed = 0
    for name in names:
        try:
            print(manage.refresh(settings, name).text())
        except McpServerError as exc:
            failed += 1
            print(f"servers/{name}: not refreshed: {exc}")
    return 1 if failed else 0


def _list(args: argparse.Namespace) -> int:
    settings = load_settings()
    entries = manage.list_servers(settings)
    if not entries:
        print(f"No servers in {settings.servers_dir}")
    for entry in entries:
        print(entry.text())
    return 0


def _remove(args: argparse.Namespace) -> int:
    settings = load_settings()
    removed = manage.remove(settings, args.name)
    print(f"servers/{args.name}: removed {', '.join(removed) or 'nothing'}")
    return 0
