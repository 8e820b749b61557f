"""Command line: ``python -m cemcp_kernel install | doctor | run | servers``."""

from __future__ import annotations

import argparse
import json
import sys

from .errors import CemcpError


def _install(args: argparse.Namespace) -> int:
    from .kernelspec import install

    prefix = sys.prefix if args.sys_prefix else args.prefix
    path = install(user=args.user, prefix=prefix)
    print(f"Installed the cemcp kernelspec in {path}")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import diagnose

    report = diagnose(refresh=args.refresh)
    print(json.dumps(report.model_dump(mode="json"), indent=2) if args.json else report.text())
    return 0 if report.can_run_code else 1


def _run(args: argparse.Namespace) -> int:
    from .engine import Engine

    with Engine() as engine:
        if args.code:
            result = engine.execute(args.request, timeout=args.timeout)
        else:
            plan = engine.plan(args.request, tools=args.tools.split(",") if args.tools else None)
            print(plan.code)
            if plan.blocked:
                print("\n".join(f"blocked: {f}" for f in plan.blocked), file=sys.stderr)
                return 2
            result = engine.execute(plan.code, timeout=args.timeout, plan=plan)
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        for notice in result.notices:
            print(f"[cemcp] {notice}", file=sys.stderr)
        if result.error is not None:
            print(
                result.error.traceback or f"{result.error.ename}: {result.error.evalue}",
                file=sys.stderr,
            )
            return 1
        if result.value is not None:
            print(result.value.repr)
    return 0


def _sandbox_packages(args: argparse.Namespace) -> int:
    from .config import load_settings
    from .sandbox import packages

    settings = load_settings()
    folder = packages.install(settings)
    if folder is None:
        print("No sandbox packages are configured (sandbox.packages).")
    else:
        print(f"Sandbox packages {', '.join(settings.sandbox.packages)} are in {folder}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m cemcp_kernel", description="cemcp: code execution with MCP"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    install = commands.add_parser("install", help="install the cemcp Jupyter kernelspec")
    where = install.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="for the current user")
    where.add_argument("--sys-prefix", action="store_true", help="in this Python environment")
    where.add_argument("--prefix", help="under this prefix")
    install.set_defaults(func=_install)

    doctor = commands.add_parser("doctor", help="what can run code here, and why not")
    doctor.add_argument(
        "--refresh", action="store_true", help="probe again instead of using the cache"
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable report")
    doctor.set_defaults(func=_doctor)

    packages = commands.add_parser(
        "sandbox-packages", help="install the packages of sandbox.packages for code in the sandbox"
    )
    packages.set_defaults(func=_sandbox_packages)

    run = commands.add_parser(
        "run", help="run one request (or --code) in a sandbox and print the result"
    )
    run.add_argument("request")
    run.add_argument("--code", action="store_true", help="the request is Python code")
    run.add_argument("--tools", help="comma-separated tools to use")
    run.add_argument("--timeout", type=float)
    run.set_defaults(func=_run)

    from .wrappers.cli import add_parser as add_servers_parser

    add_servers_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if argv[:1] == ["servers"] and "--" in argv:  # servers add NAME [options] -- COMMAND ARGS...
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1 :]
    args = build_parser().parse_args(argv)
    if command:
        args.server_command = [*getattr(args, "server_command", []), *command]
    try:
        return int(args.func(args))
    except CemcpError as exc:
        print(f"cemcp: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a folder that cannot be written, a file that cannot be read
        print(f"cemcp: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
