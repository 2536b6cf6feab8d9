"""Running blocking work in daemon threads that the event loop awaits.

Not the default executor: its threads are joined when the interpreter exits, so one sync tool stuck in a
blocking call would hold up a shutdown for as long as it hangs, and tools would compete with the loop's own
uses of that pool (name resolution). A thread cannot be killed; a daemon thread at least cannot keep the
process alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def run_in_daemon_thread(function: Callable[..., T], *args: Any, name: str) -> T:
    """`function(*args)` in a new daemon thread, with the caller's context variables; awaited here.

    Cancelling the await abandons the thread: it runs on, and its result is dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # the awaiting call was cancelled: the result is dropped
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(function, *args)
        except BaseException as exc:  # handed to the awaiting coroutine, which decides
            error = exc
        # RuntimeError: the loop closed while the thread ran, so nobody is waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=target, name=name, daemon=True).start()
    return await future
