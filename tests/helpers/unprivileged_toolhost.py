"""What a toolhost that is not root does with a user tool, without and with the operator's opt-in; run by a test
as `python -m helpers.unprivileged_toolhost USER DIRECTORY` in a fresh interpreter, which prints the answers as
JSON.

A root test process cannot start `toolhost serve` as another user: the interpreter lives under /root, which that
user may not read. So this process starts as root, serves a user tool once as root with process_user root (the
same refusal, and every module the scenario needs is imported while /root is readable), then becomes USER for
good and runs the scenario again, twice: the toolhost of a server that is not root. A fresh interpreter, not a
fork of the test process: a fork would inherit gRPC's threads and locks in whatever state they were.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pwd
import sys
from datetime import UTC, datetime
from pathlib import Path

from toolhost_server.app import Toolhost
from toolhost_server.auth import AuthMethod, Caller, Permissions
from toolhost_server.config import Config
from toolhost_server.errors import FailedPreconditionError
from toolhost_server.pipeline import CallRequest
from toolhost_server.user_tools.records import UserToolRecord

MAKER = Caller("maker", frozenset({"maker"}), AuthMethod.TOKEN, Permissions(manage_tools=True))


def probe() -> UserToolRecord:
    now = datetime.now(UTC)
    return UserToolRecord(
        slug="probe", name="", description="A probe.", category="", system_prompt="",
        input_schema={"type": "object"}, script="id -u", enabled=True, timeout_seconds=None, tags=(),
        credentials=(), version=0, created_at=now, updated_at=now, shadowed_by="")


async def user_tool_answer(config: Config) -> str:
    """The probe's output (`id -u` of its script), or the refusal of its creation."""
    toolhost = Toolhost(config)
    await toolhost.start()
    try:
        assert toolhost.user_tools is not None
        await toolhost.user_tools.create(MAKER, probe())
        result = await toolhost.pipeline.call(CallRequest(name="probe", arguments={}))
        return result.outcome.output.strip() if result.success else repr(result.failure)
    except FailedPreconditionError as refused:
        return str(refused)
    finally:
        await toolhost.close()


def main(user: str, directory: Path) -> None:
    catalog = directory / "catalog"
    catalog.mkdir()
    base = dataclasses.replace(Config(), grpc_address="127.0.0.1:0", http_address="", watch_catalog=False,
                               catalog_dirs=(str(catalog),))
    answers: dict[str, str | int] = {}
    if os.geteuid() == 0:
        answers["as_root"] = asyncio.run(user_tool_answer(dataclasses.replace(
            base, data_dir=str(directory / "as_root"), process_user="root", user_tools_as_server_user=True)))
        entry = pwd.getpwnam(user)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
    answers["uid"] = os.geteuid()
    for name, opted_in in (("default", False), ("opted_in", True)):
        answers[name] = asyncio.run(user_tool_answer(dataclasses.replace(
            base, data_dir=str(directory / name), user_tools_as_server_user=opted_in)))
    print(json.dumps(answers))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
