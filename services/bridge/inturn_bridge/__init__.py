"""The Pub/Sub bridge: Pub/Sub messages (pull or push) onto ``inturn.messages``, acked only after Kafka confirmed.

``convert`` turns a Pub/Sub message into a ``Message`` (or poison), ``relay`` decides write /
dead-letter / refuse and keeps per-room order across failures, ``pull`` and ``push`` are the two
ways in, ``service`` is the process (``inturn bridge``). See docs/bridge.md.
"""
