"""Pull mode: streaming pull from a subscription with message ordering, acked after Kafka confirmed.

The Pub/Sub client calls ``_on_message`` on its thread pool; the Kafka write's future settles on
the producer's poll thread, which acks (written, duplicate, dead-lettered) or nacks (not written).
Flow control bounds how many messages (and bytes) are leased, and so how many writes are in flight.
"""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError, Future
from functools import partial
from typing import Any

import structlog
from google.api_core import exceptions as gexc
from google.cloud import pubsub_v1

from inturn.errors import ConfigError
from inturn.metrics import bridge as metrics
from inturn.settings.bridge import BridgeSettings
from inturn_bridge.convert import PubsubRecord
from inturn_bridge.relay import Relay, Settled

log = structlog.get_logger("inturn.bridge")


class PullBridge:
    """Streaming pull of one subscription into a ``Relay``; ``start`` then ``stop`` (graceful)."""

    def __init__(self, settings: BridgeSettings, relay: Relay) -> None:
        self._settings = settings
        self._relay = relay
        self._draining = threading.Event()
        # Messages handed to the relay whose ack/nack has not been issued yet (what stop() waits for).
        self._outstanding = 0
        self._settled = threading.Condition()
        self._subscriber: Any = None  # pubsub_v1.SubscriberClient, typed Any: the library ships no types
        self._stream: Any = None  # its StreamingPullFuture

    @property
    def subscription_path(self) -> str:
        """``projects/<project>/subscriptions/<id>``."""
        return f"projects/{self._settings.bridge_project}/subscriptions/{self._settings.bridge_subscription}"

    def start(self) -> None:
        """Check the subscription (exists, ordering enabled) and start pulling; ``ConfigError`` otherwise."""
        self._subscriber = pubsub_v1.SubscriberClient()
        try:
            subscription = self._subscriber.get_subscription(subscription=self.subscription_path, timeout=30)
        except gexc.NotFound as exc:
            raise ConfigError(f"subscription {self.subscription_path} does not exist") from exc
        if not subscription.enable_message_ordering:
            raise ConfigError(
                f"subscription {self.subscription_path} does not have message ordering enabled: "
                "Pub/Sub would deliver a room's messages in any order (recreate it with enable_message_ordering)"
            )
        flow = pubsub_v1.types.FlowControl(
            max_messages=self._settings.bridge_max_messages, max_bytes=self._settings.bridge_max_bytes
        )
        self._stream = self._subscriber.subscribe(self.subscription_path, callback=self._on_message, flow_control=flow)
        log.info("bridge.pulling", subscription=self.subscription_path, max_messages=flow.max_messages)

    def _on_message(self, message: Any) -> None:
        if self._draining.is_set():
            # Shutting down: nothing new is written; Pub/Sub hands it to the next subscriber at once.
            metrics.NACKS.labels("pull", "draining").inc()
            metrics.MESSAGES.labels("pull", "nacked").inc()
            message.nack()
            return
        record = PubsubRecord(
            message_id=message.message_id,
            data=message.data,
            attributes=dict(message.attributes),
            ordering_key=message.ordering_key,
            publish_time_ms=int(message.publish_time.timestamp() * 1000),
        )
        with self._settled:
            self._outstanding += 1
        self._relay.submit(record).add_done_callback(partial(self._settle, message))

    def _settle(self, message: Any, settled: Future[Settled]) -> None:
        if settled.exception() is None:
            message.ack()
        else:
            message.nack()
        with self._settled:
            self._outstanding -= 1
            self._settled.notify_all()

    @property
    def running(self) -> bool:
        """Whether the stream is up and taking messages."""
        return self._stream is not None and not self._stream.done() and not self._draining.is_set()

    def failure(self) -> BaseException | None:
        """The error that ended the stream, if it ended on its own (e.g. the subscription was deleted)."""
        if self._stream is None or not self._stream.done() or self._draining.is_set():
            return None
        try:
            error: BaseException | None = self._stream.exception(timeout=0)
        except CancelledError as exc:  # cancelled by someone else than stop(): the stream is gone all the same
            return exc
        return error

    def add_done_callback(self, callback: Any) -> None:
        """Call ``callback(stream_future)`` when the stream ends (for the service to exit on failure)."""
        if self._stream is not None:
            self._stream.add_done_callback(callback)

    def stop(self, timeout: float) -> bool:
        """Stop taking messages, let outstanding writes settle (ack/nack), then close the stream.

        Returns whether every outstanding write settled within ``timeout``. The stream is closed
        only after the writes settled because the client drops acks issued after it closed: those
        messages would be delivered again (duplicates, not losses).
        """
        self._draining.set()
        with self._settled:
            settled = self._settled.wait_for(lambda: self._outstanding == 0, timeout)
        if not settled:
            log.warning("bridge.drain_timeout", outstanding=self._outstanding, timeout_s=timeout)
        if self._stream is not None:
            self._stream.cancel()  # messages held by the client are nacked by the client itself
            try:
                self._stream.result(timeout=timeout)
            except gexc.GoogleAPICallError as exc:
                log.warning("bridge.stream_closed_with_error", error=str(exc))
        if self._subscriber is not None:
            self._subscriber.close()
        log.info("bridge.stopped", settled=settled)
        return settled
