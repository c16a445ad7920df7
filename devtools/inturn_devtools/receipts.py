"""The receipt-log checker: what reached the recipients' devices, against what was produced, per room.

The platform simulator logs one receipt per device delivery, in device order. ``check`` compares
that log with the per-room order in which messages were produced to Kafka and reports, per room and
in total: messages lost (produced, never received), duplicated (extra copies received while nothing
newer of the room had arrived yet), reordered (adjacent inversions of the first receptions against room
order, plus stale copies: an older message received again after a newer one of its room, which the
recipient sees out of order) and unexpected (received, never produced). Duplicates are judged per room
too: ``worst_room`` names the room with the most. Every ordering and fault test reads its verdict from here.
"""

from __future__ import annotations

import itertools
import json
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RECEIPTS_PATH = "/_sim/receipts"


@dataclass(frozen=True)
class RoomReport:
    """One room's verdict. Message id lists are in room order (lost) or device order (unexpected)."""

    room_id: str
    produced: int
    received: int  # distinct produced messages that arrived at least once
    lost: tuple[str, ...] = ()
    duplicated: int = 0  # extra copies not stale: a message received 3 times in a row counts 2
    reordered: int = 0  # adjacent inversions in device order of first receptions, plus ``stale``
    unexpected: tuple[str, ...] = ()
    stale: int = 0  # copies of a message received after a newer message of the room (counted in ``reordered``)

    @property
    def clean(self) -> bool:
        """Nothing lost, duplicated, reordered or unexpected."""
        return not (self.lost or self.duplicated or self.reordered or self.unexpected)


@dataclass(frozen=True)
class Report:
    """The verdict over all rooms; ``rooms`` holds every room produced or received."""

    rooms: Mapping[str, RoomReport]
    unattributed: int = 0  # receipts without a (room_id, message_id): not inturn's sends
    reordered_rooms: tuple[str, ...] = field(default=())

    @property
    def produced(self) -> int:
        """Messages produced."""
        return sum(r.produced for r in self.rooms.values())

    @property
    def lost(self) -> int:
        """Messages produced and never received."""
        return sum(len(r.lost) for r in self.rooms.values())

    @property
    def duplicated(self) -> int:
        """Extra copies received."""
        return sum(r.duplicated for r in self.rooms.values())

    @property
    def reordered(self) -> int:
        """Adjacent inversions of first receptions and stale copies, over all rooms."""
        return sum(r.reordered for r in self.rooms.values())

    @property
    def stale(self) -> int:
        """Stale copies (older messages received again after newer ones), over all rooms; part of ``reordered``."""
        return sum(r.stale for r in self.rooms.values())

    @property
    def worst_room(self) -> RoomReport | None:
        """The room with the most duplicates (ties: the first by room id), or None when no room has any."""
        worst: RoomReport | None = None
        for room in sorted(self.rooms.values(), key=lambda r: r.room_id):
            if room.duplicated > (worst.duplicated if worst is not None else 0):
                worst = room
        return worst

    @property
    def max_duplicated_per_room(self) -> int:
        """The duplicates of the worst room (0 when none has any)."""
        worst = self.worst_room
        return worst.duplicated if worst is not None else 0

    @property
    def unexpected(self) -> int:
        """Distinct messages received that were never produced."""
        return sum(len(r.unexpected) for r in self.rooms.values())

    def ok(
        self,
        *,
        max_lost: int = 0,
        max_duplicates: int = 0,
        max_reordered: int = 0,
        max_unexpected: int = 0,
        max_duplicates_per_room: int | None = None,
    ) -> bool:
        """Whether every total is within its bound (all 0 by default: a perfect run).

        ``max_duplicates_per_room`` bounds every room's duplicates too (unset: only the total is bounded).
        """
        return (
            self.lost <= max_lost
            and self.duplicated <= max_duplicates
            and (max_duplicates_per_room is None or self.max_duplicated_per_room <= max_duplicates_per_room)
            and self.reordered <= max_reordered
            and self.unexpected <= max_unexpected
        )

    def summary(self, worst: int = 5) -> str:
        """A few readable lines: totals, then the ``worst`` rooms with anything wrong."""
        worst_room = self.worst_room
        lines = [
            f"{len(self.rooms)} rooms, {self.produced} produced: lost {self.lost}, duplicated {self.duplicated}"
            + (f" (worst room {worst_room.room_id}: {worst_room.duplicated})" if worst_room is not None else "")
            + f", reordered {self.reordered} (in {len(self.reordered_rooms)} rooms"
            + (f", {self.stale} stale re-sends" if self.stale else "")
            + f"), unexpected {self.unexpected}"
            + (f", unattributed receipts {self.unattributed}" if self.unattributed else "")
        ]
        bad = sorted(
            (r for r in self.rooms.values() if not r.clean),
            key=lambda r: (-(len(r.lost) + r.duplicated + r.reordered + len(r.unexpected)), r.room_id),
        )
        for room in bad[:worst]:
            lines.append(
                f"  {room.room_id}: produced {room.produced}, received {room.received}, "
                f"lost {len(room.lost)} {list(room.lost[:5])}, duplicated {room.duplicated}, "
                f"reordered {room.reordered}"
                + (f" ({room.stale} stale)" if room.stale else "")
                + f", unexpected {len(room.unexpected)} {list(room.unexpected[:5])}"
            )
        if len(bad) > worst:
            lines.append(f"  ... and {len(bad) - worst} more rooms with problems")
        return "\n".join(lines)


def check(receipts: Iterable[Mapping[str, Any]], produced: Mapping[str, Sequence[str]]) -> Report:
    """Compare device receipts (in device order, or carrying ``seq``) with each room's produced order."""
    ordered = sorted(receipts, key=lambda r: r.get("seq", 0))  # stable: receipts without seq keep their order
    unattributed = 0
    positions_of: dict[str, dict[str, int]] = {}
    for room, room_order in produced.items():
        position = positions_of.setdefault(room, {})
        for index, message in enumerate(room_order):
            position.setdefault(message, index)
    seen: set[tuple[str, str]] = set()
    first_order: dict[str, list[str]] = {}  # room -> message ids in device order of first reception
    newest: dict[str, int] = {}  # room -> the latest room position received so far
    duplicated: dict[str, int] = {}
    stale: dict[str, int] = {}
    for receipt in ordered:
        room_id, message_id = receipt.get("room_id"), receipt.get("message_id")
        if room_id is None or message_id is None:
            unattributed += 1
            continue
        room, message = str(room_id), str(message_id)
        at = positions_of.get(room, {}).get(message)
        if (room, message) not in seen:
            seen.add((room, message))
            first_order.setdefault(room, []).append(message)
        elif at is not None and at < newest.get(room, -1):
            stale[room] = stale.get(room, 0) + 1  # an older message again after a newer one: out of order
        else:
            duplicated[room] = duplicated.get(room, 0) + 1
        if at is not None:
            newest[room] = max(newest.get(room, -1), at)

    rooms: dict[str, RoomReport] = {}
    for room in sorted(set(produced) | set(first_order)):
        position = positions_of.get(room, {})
        arrived = first_order.get(room, [])
        arrived_set = set(arrived)
        positions = [position[m] for m in arrived if m in position]
        rooms[room] = RoomReport(
            room_id=room,
            produced=len(position),
            received=len(positions),
            lost=tuple(m for m in position if m not in arrived_set),
            duplicated=duplicated.get(room, 0),
            reordered=sum(1 for a, b in itertools.pairwise(positions) if a > b) + stale.get(room, 0),
            unexpected=tuple(m for m in arrived if m not in position),
            stale=stale.get(room, 0),
        )
    reordered_rooms = tuple(room for room, report in rooms.items() if report.reordered)
    return Report(rooms=rooms, unattributed=unattributed, reordered_rooms=reordered_rooms)


def produced_order(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Per-room message ids from ``(room_id, message_id)`` pairs in production order."""
    rooms: dict[str, list[str]] = {}
    for room, message in pairs:
        rooms.setdefault(room, []).append(message)
    return rooms


def load_receipts(source: str | Path, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """Receipts from a JSON-lines file, or from a simulator's ``/_sim/receipts`` (its base URL or that URL).

    Reading a URL blocks: do not call it on the event loop the simulator itself runs on (use
    ``fetch_receipts`` there).
    """
    text = str(source)
    if text.startswith(("http://", "https://")):
        with urllib.request.urlopen(receipts_url(text), timeout=timeout_s) as answer:  # noqa: S310 - http(s) only
            data: dict[str, Any] = json.loads(answer.read())
        receipts: list[dict[str, Any]] = data["receipts"]
        return receipts
    with open(text, encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


async def fetch_receipts(url: str, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """``load_receipts`` for a simulator URL, without blocking the event loop."""
    import aiohttp

    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
        session.get(receipts_url(url)) as answer,
    ):
        answer.raise_for_status()
        data = await answer.json()
    receipts: list[dict[str, Any]] = data["receipts"]
    return receipts


def receipts_url(url: str) -> str:
    """``url`` itself when it names ``/_sim/receipts``, else that endpoint under the base URL ``url``."""
    parts = urllib.parse.urlsplit(url)
    if parts.path.rstrip("/").endswith(RECEIPTS_PATH):
        return url
    return url.rstrip("/") + RECEIPTS_PATH
