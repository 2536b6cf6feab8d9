"""The server's logs assembled from its Config: the memory ring, the database writer, and the inspector over
every configured reader."""

from __future__ import annotations

from ..config import Config
from ..sanitize import LearningRedactor, Redactor
from .database import DatabaseLogHandler, DatabaseLogReader
from .file_reader import FileLogReader
from .inspector import LogInspector
from .line_parser import DEFAULT_LINE_PATTERN
from .memory import MemoryLogReader, install_memory_ring
from .reader import LogReader


class ServerLogs:
    """`start()` on the event loop attaches the handlers; `close()` detaches, writes what waits for the
    database and closes the readers."""

    def __init__(self, config: Config, redactor: Redactor | LearningRedactor) -> None:
        self._config = config
        self._redactor = redactor
        self.ring = install_memory_ring(config.log_memory_records, redactor, config.log_memory_bytes)
        readers: list[LogReader] = [MemoryLogReader(self.ring)]
        if config.log_files:
            readers.append(FileLogReader(config.log_files, config.log_file_pattern or DEFAULT_LINE_PATTERN))
        self.database_handler: DatabaseLogHandler | None = None
        if config.log_database:
            # Imported here: SQLAlchemy takes a while to import, and most servers keep their logs elsewhere.
            from ..store.database import Store
            from ..store.log_table import LogTable

            table = LogTable(Store.from_config(config))
            self.database_handler = DatabaseLogHandler(table, redactor, max_waiting_bytes=config.store_buffer_bytes)
            readers.append(DatabaseLogReader(table, self.ring.oldest_time))
        self.inspector = LogInspector(readers, redactor=redactor)

    def start(self) -> None:
        # Again: something may have taken the ring off the root logger since (logging.basicConfig(force=True) does).
        install_memory_ring(self._config.log_memory_records, self._redactor, self._config.log_memory_bytes)
        if self.database_handler is not None:
            self.database_handler.start()

    def stop_following(self) -> None:
        """End TailLogs streams: the server is shutting down."""
        self.inspector.stop_following()

    async def close(self) -> None:
        self.inspector.stop_following()
        if self.database_handler is not None:
            await self.database_handler.close_async()
        self.inspector.close()
