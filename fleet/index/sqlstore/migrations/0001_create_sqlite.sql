-- One row per bundle: the columns the queries filter on, and the whole
-- summary as JSON (what Summaries returns).
CREATE TABLE bundles (
  id          TEXT PRIMARY KEY,
  path        TEXT NOT NULL,
  time        INTEGER NOT NULL, -- the run's end, unix nanoseconds
  host        TEXT NOT NULL,
  job         TEXT NOT NULL,
  rank        TEXT NOT NULL,
  sig_version INTEGER NOT NULL,
  fine        TEXT NOT NULL,
  coarse      TEXT NOT NULL,
  title       TEXT NOT NULL,
  sig_class   TEXT NOT NULL,
  summary     TEXT NOT NULL
);
CREATE INDEX bundles_time ON bundles(time);
CREATE INDEX bundles_sig ON bundles(sig_version, fine);

-- Files already read, by size and modification time: only new ones are opened.
CREATE TABLE sources (
  path  TEXT PRIMARY KEY,
  size  INTEGER NOT NULL,
  mtime INTEGER NOT NULL
);
