-- inturn's state in PostgreSQL: room cursors, partition epochs (fencing) and dead letters.

-- Per room: the highest offset of its partition that reached a terminal outcome.
-- Messages at or below it are skipped as already done after a rebalance or a crash.
CREATE TABLE IF NOT EXISTS room_cursors (
    messages_topic  text        NOT NULL,
    room_id         text        NOT NULL,
    partition       integer     NOT NULL,
    terminal_offset bigint      NOT NULL,
    message_id      text        NOT NULL,
    outcome         text        NOT NULL,
    epoch           bigint      NOT NULL,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (messages_topic, room_id)
);

-- Per messages partition: the epoch of its current owner. A new owner bumps it; cursor writes
-- carrying an older epoch are refused, which fences a worker that lost the partition.
CREATE TABLE IF NOT EXISTS partition_epochs (
    messages_topic text        NOT NULL,
    partition      integer     NOT NULL,
    epoch          bigint      NOT NULL,
    owner          text        NOT NULL,
    claimed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (messages_topic, partition)
);

-- Messages that failed for good, with the reason; replayable with `inturn dlq replay`.
CREATE TABLE IF NOT EXISTS dead_letters (
    id              bigserial   PRIMARY KEY,
    source          text        NOT NULL,
    reason          text        NOT NULL,
    room_id         text,
    message_id      text,
    topic           text,
    partition       integer,
    kafka_offset    bigint,
    raw             bytea       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    replayed_at     timestamptz
);
CREATE INDEX IF NOT EXISTS dead_letters_room_idx ON dead_letters (room_id, topic, partition, kafka_offset);
CREATE INDEX IF NOT EXISTS dead_letters_pending_idx ON dead_letters (created_at) WHERE replayed_at IS NULL;

-- Rooms an operator must release (policy 'block' after a dead letter).
CREATE TABLE IF NOT EXISTS blocked_rooms (
    messages_topic text        NOT NULL,
    room_id        text        NOT NULL,
    reason         text        NOT NULL,
    blocked_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (messages_topic, room_id)
);
