-- The PostgreSQL twin of 0001_create_sqlite.sql. Keys compare bytewise
-- (COLLATE "C"), as Go and SQLite compare them, whatever the database's
-- locale: ties in time are ordered by id the same way on both.
CREATE TABLE bundles (
  id          TEXT COLLATE "C" PRIMARY KEY,
  path        TEXT NOT NULL,
  time        BIGINT NOT NULL, -- the run's end, unix nanoseconds
  host        TEXT NOT NULL,
  job         TEXT NOT NULL,
  rank        TEXT NOT NULL,
  sig_version INTEGER NOT NULL,
  fine        TEXT COLLATE "C" NOT NULL,
  coarse      TEXT NOT NULL,
  title       TEXT NOT NULL,
  sig_class   TEXT NOT NULL,
  summary     TEXT NOT NULL
);
CREATE INDEX bundles_time ON bundles(time);
CREATE INDEX bundles_sig ON bundles(sig_version, fine);

CREATE TABLE sources (
  path  TEXT COLLATE "C" PRIMARY KEY,
  size  BIGINT NOT NULL,
  mtime BIGINT NOT NULL
);
