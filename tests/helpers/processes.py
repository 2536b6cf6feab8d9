"""Processes seen through /proc: what a tool left behind (found by a marker in its environment), and zombies
of this process, where the in-process server's children are reaped."""

from __future__ import annotations

import os
import uuid


def marker() -> str:
    """A fresh value for a tool's environment, by which leftover_processes finds its processes."""
    return f"toolhost-test-{uuid.uuid4().hex}"


def leftover_processes(marker: str) -> list[int]:
    """Pids of live processes whose environment holds `marker` (how tests find what a tool left behind)."""
    needle = marker.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
            with open(f"/proc/{entry}/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state != b"Z":
            found.append(int(entry))
    return found


def zombie_children() -> list[int]:
    """Children of this process (the in-process server) that exited and were never reaped, found through each
    thread's /proc/self/task/<tid>/children."""
    found = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as handle:
                children = handle.read().split()
        except FileNotFoundError:  # the thread ended since the listing: it has no children left to look at
            continue
        for pid in children:
            try:
                with open(f"/proc/{pid}/stat", "rb") as stat:
                    state = stat.read().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if state == b"Z":
                found.append(int(pid))
    return found


def server_zombies() -> list[int]:
    """Zombies whose parent is this process (the in-process server), found through every /proc/<pid>/stat."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = process_stat(int(entry))
            if stat is not None and stat[1] == os.getpid() and stat[0] == "Z":
                found.append(int(entry))
    return found


def process_stat(pid: int) -> tuple[str, int] | None:
    """The state and the parent of `pid`, or None when there is no such process (any more)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[0].decode(), int(fields[1])
