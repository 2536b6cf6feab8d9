"""The `toolhost` command: `serve`, and client commands that talk to a running server."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from .config import SETTINGS, ConfigError, load_config
from .serve import configure_logging, serve


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("serve", help="run the server (configured by flags, TOOLHOST_* and --config)")
    parser.add_argument("--config", help="YAML file of settings (or TOOLHOST_CONFIG)")
    for setting in SETTINGS:
        if setting.name == "catalog_dirs":
            parser.add_argument("--catalog-dir", dest="catalog_dirs", action="append", help=setting.help)
        else:
            parser.add_argument(setting.flag, dest=setting.name, help=f"{setting.help} [{setting.env_var}]")


def _run_serve(args: argparse.Namespace) -> int:
    flags = {s.name: getattr(args, s.name) for s in SETTINGS if getattr(args, s.name, None) is not None}
    try:
        config = load_config(flags, config_file=args.config)
    except ConfigError as exc:
        print(f"toolhost: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.log_level)
    try:
        return asyncio.run(serve(config))
    except OSError as exc:
        print(f"toolhost: {exc}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toolhost", description="Host tools for AI agents over gRPC.")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _run_serve(args)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
