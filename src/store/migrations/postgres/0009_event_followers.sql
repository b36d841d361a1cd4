-- Replicas that follow every replica's events (cluster/feed.ts): those whose readers wait for, or
-- stream, runs that another replica may own. An append announces its runs on `toolgraph_events` only
-- while some follower's row has not expired; with none, an append sends no NOTIFY and wakes no
-- replica. A follower renews its row while it follows; a dead one's row expires (`until`, the
-- database's clock, epoch ms).
CREATE TABLE event_followers (
  follower TEXT   PRIMARY KEY,
  until    BIGINT NOT NULL
);
