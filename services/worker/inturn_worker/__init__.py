"""The worker: consumes ``inturn.messages`` and sends each room's messages in turn.

Read top to bottom (docs/architecture.md walks one message through these): ``app`` (lifecycle) → ``intake``
(Kafka consumer, rebalances, checkpoint rounds, commits) → ``partition`` (a partition's rooms, offsets, cursors,
epoch and lease) → ``room`` (one sender loop per room: send, await ack or timeout, next) → ``ack_reader`` and
``acks`` (the acks partition and the futures it resolves) → ``events``. ``limits``, ``timeouts``,
``dead_letters`` and ``checkpoint`` are what those call; the SQL is ``inturn.db.store``.
"""
