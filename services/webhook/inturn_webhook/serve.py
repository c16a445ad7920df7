"""Running the webhook: check the topic layout, then serve with uvicorn (uvloop, httptools) until SIGTERM, the
callbacks on ``INTURN_WEBHOOK_PORT``, probes, metrics and the OpenAPI document on ``INTURN_WEBHOOK_INTERNAL_PORT``
(the latter from a thread of each serving process, started by the application's lifespan: ``inturn_webhook.internal``).

uvicorn handles SIGTERM by finishing the requests in flight, then runs the ``lifespan`` shutdown,
which closes the Kafka producer. Each worker process builds the application from the environment
(``app_from_env``), so settings reach every worker the same way.
"""

from __future__ import annotations

import structlog
import uvicorn
from uvicorn.supervisors import Multiprocess

from inturn import logs, topics
from inturn.kafka import make_admin
from inturn.settings.webhook import WebhookSettings
from inturn_webhook.guard import GuardedProtocol

log = structlog.get_logger("inturn.webhook")


def check_topics(settings: WebhookSettings) -> topics.TopicLayout:
    """The topic layout, or ``TopicMissingError``/``TopicMismatchError``/``KafkaClientError``: do not start."""
    return topics.check(make_admin(settings), settings, statuses=settings.webhook_statuses_split)


def run(settings: WebhookSettings) -> None:
    """Serve the webhook in the foreground until SIGTERM or Ctrl-C."""
    logs.configure(settings.log_format, settings.log_level)
    layout = check_topics(settings)
    log.info(
        "topics_checked",
        messages=layout.messages,
        acks=layout.acks,
        statuses=layout.statuses if settings.webhook_statuses_split else "off",
    )
    config = uvicorn.Config(
        "inturn_webhook.app:app_from_env",
        factory=True,
        host=settings.webhook_host,
        port=settings.webhook_port,
        workers=settings.webhook_workers,
        loop="uvloop",
        # llhttp through httptools (h11, pure Python, cost more per request than the rest of a callback), with the
        # limits uvicorn lacks: header size, count and read time, body read time, the body budget (guard.py).
        http=GuardedProtocol,
        ws="none",  # the webhook speaks no WebSocket
        timeout_keep_alive=settings.webhook_keepalive_timeout_s,
        lifespan="on",
        log_config=None,  # structlog owns logging (inturn.logs.configure)
        access_log=False,  # one line per callback costs more than the callback; metrics count requests
        # The webhook reads no client address: without this uvicorn rewrites the scope from X-Forwarded-* on every
        # request from a trusted proxy (a pass over the headers, ~6 us measured in-process under load).
        proxy_headers=False,
        timeout_graceful_shutdown=30,
    )
    # The public port here; each serving process binds the internal one itself (its lifespan starts the thread).
    sockets = [config.bind_socket()]
    if config.workers > 1:
        Multiprocess(config, sockets=sockets).run()
    else:
        uvicorn.Server(config).run(sockets=sockets)
