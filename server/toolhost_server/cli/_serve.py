"""`toolhost serve`: its flags, one per server setting, and running the server with them."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ..config import SETTINGS, ConfigError, load_config_with_sources


def add_serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("serve", help="run the server (configured by flags, TOOLHOST_* and --config)")
    parser.add_argument("--config", help="YAML file of settings (or TOOLHOST_CONFIG)")
    for setting in SETTINGS:
        if setting.name == "catalog_dirs":
            parser.add_argument("--catalog-dir", dest="catalog_dirs", action="append", help=setting.help)
        elif setting.name == "log_files":
            parser.add_argument("--log-file", dest="log_files", action="append",
                                help=f"{setting.help} [{setting.env_var}]")
        elif setting.name == "workspaces":
            parser.add_argument("--workspace", dest="workspaces", action="append", metavar="NAME=PATH",
                                help=f"{setting.help} [{setting.env_var}]")
        elif setting.name == "databases":
            parser.add_argument("--database", dest="databases", action="append", metavar="NAME=URL",
                                help=f"{setting.help} [{setting.env_var}]")
        elif setting.is_switch:
            parser.add_argument(setting.flag, dest=setting.name, nargs="?", const="true", metavar="true|false",
                                help=f"{setting.help} [{setting.env_var}]")
        else:
            parser.add_argument(setting.flag, dest=setting.name, help=f"{setting.help} [{setting.env_var}]")


def run_serve(args: argparse.Namespace) -> int:
    # Imported here: the server pulls in every runner and tool pack, which the client commands do not need.
    from ..serve import configure_logging, serve

    flags = {s.name: getattr(args, s.name) for s in SETTINGS if getattr(args, s.name, None) is not None}
    configure_logging("INFO")  # so warnings while reading the configuration use the server's log format
    try:
        config, sources = load_config_with_sources(flags, config_file=args.config)
    except ConfigError as exc:
        print(f"toolhost: {exc}", file=sys.stderr)
        return 2
    configure_logging(config.log_level, log_format=config.log_format)
    try:
        return asyncio.run(serve(config, sources))
    except OSError as exc:
        print(f"toolhost: {exc}", file=sys.stderr)
        return 1
