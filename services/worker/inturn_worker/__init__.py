"""The worker: consumes ``inturn.messages`` and sends each room's messages in turn.

Read top to bottom: ``app`` (lifecycle) → ``intake`` (Kafka consumer, rebalances, commits) →
``room`` (one sender loop per room: send, await ack or timeout, next) → ``acks`` (the acks
reader and the futures it resolves). ``offsets``, ``limits``, ``timeouts``, ``store`` and
``events`` are the bookkeeping those files call.
"""
