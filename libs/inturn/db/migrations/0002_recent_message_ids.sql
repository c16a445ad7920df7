-- Per room: digests of the message ids of its last few sent messages (8 bytes each, newest last, at most
-- INTURN_WORKER_DEDUP_WINDOW of them). A second copy of one of those messages (a producer that wrote it twice,
-- at another offset) is recognised by its id and recorded as a duplicate, never sent again.
ALTER TABLE room_cursors ADD COLUMN IF NOT EXISTS recent_ids bytea NOT NULL DEFAULT '\x'::bytea;
