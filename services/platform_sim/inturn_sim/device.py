"""The receipt log: one record per message reaching a recipient's device, in device order (the oracle).

Records are kept in memory (``GET /_sim/receipts``) and, when a path is set, appended as JSON lines
to a file through a buffer that is flushed periodically and on shutdown.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import orjson


class ReceiptLog:
    """Device deliveries in the order they happened; counts duplicates of (room_id, message_id)."""

    def __init__(self, path: str | None = None, keep: int = 1_000_000) -> None:
        self.receipts: list[dict[str, Any]] = []  # the newest ``keep`` at most; the file has them all
        self._keep = keep
        self._seq = 0  # seq of the last receipt
        self.duplicates = 0
        self._seen: set[tuple[str, str]] = set()
        self._buffer: list[bytes] = []
        self._file: IO[bytes] | None = None
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "wb")  # noqa: SIM115 - held open for the process's life, closed in close()

    def record(
        self,
        recipient: str,
        phone_number_id: str,
        room_id: str | None,
        message_id: str | None,
        wamid: str,
        accepted_at_ms: int,
        delivered_at_ms: int,
        via: str | None = None,
    ) -> dict[str, Any]:
        """Append one device delivery; ``duplicate`` when the same (room_id, message_id) arrived before; ``via``:
        the sender's name from a ``/_via/{name}/`` send path (only then in the record)."""
        duplicate = False
        if room_id is not None and message_id is not None:
            key = (room_id, message_id)
            if key in self._seen:
                duplicate = True
                self.duplicates += 1
            else:
                self._seen.add(key)
        self._seq += 1
        receipt = {
            "seq": self._seq,
            "recipient": recipient,
            "phone_number_id": phone_number_id,
            "room_id": room_id,
            "message_id": message_id,
            "wamid": wamid,
            "accepted_at_ms": accepted_at_ms,
            "delivered_at_ms": delivered_at_ms,
            "duplicate": duplicate,
        }
        if via is not None:
            receipt["via"] = via
        self.receipts.append(receipt)
        if len(self.receipts) > self._keep:
            # Trim a quarter at once so the cost is amortised; a long benchmark must not grow without bound.
            del self.receipts[: len(self.receipts) - self._keep * 3 // 4]
        if self._file is not None:
            self._buffer.append(orjson.dumps(receipt, option=orjson.OPT_APPEND_NEWLINE))
        return receipt

    def since(self, seq: int) -> list[dict[str, Any]]:
        """Receipts after sequence number ``seq`` (0: all that are still kept in memory)."""
        first = self._seq - len(self.receipts) + 1  # seq of receipts[0]
        return self.receipts[max(seq - first + 1, 0) :]

    def flush(self) -> None:
        """Write the buffered lines to the file (a no-op without a file)."""
        if self._file is None or not self._buffer:
            return
        self._file.write(b"".join(self._buffer))
        self._file.flush()
        self._buffer.clear()

    def clear(self) -> None:
        """Forget every receipt (``POST /_sim/reset``); the file starts over too."""
        self.receipts.clear()
        self._seq = 0
        self._seen.clear()
        self._buffer.clear()
        self.duplicates = 0
        if self._file is not None:
            self._file.seek(0)
            self._file.truncate()

    def close(self) -> None:
        """Flush and close the file."""
        self.flush()
        if self._file is not None:
            self._file.close()
            self._file = None
