-- The PostgreSQL twin of 0002_view_sqlite.sql.
ALTER TABLE bundles ADD COLUMN evidence INTEGER NOT NULL DEFAULT 1;
UPDATE bundles SET evidence = CASE WHEN coalesce(summary::jsonb ->> 'verdict', '') IN ('unknown', '') THEN 0 ELSE 1 END;
DROP INDEX bundles_sig;
CREATE INDEX bundles_sig_time ON bundles(sig_version, fine, time, evidence);

CREATE TABLE gpu_names (
  alias_key TEXT COLLATE "C" PRIMARY KEY,
  gpu_id    TEXT NOT NULL,
  time      BIGINT NOT NULL,
  bundle_id TEXT COLLATE "C" NOT NULL,
  pos       INTEGER NOT NULL
);
-- One row per key in a single INSERT (PostgreSQL refuses to update a row
-- twice in one statement): the latest naming bundle's.
INSERT INTO gpu_names (alias_key, gpu_id, time, bundle_id, pos)
SELECT DISTINCT ON (k) k, gpu_id, time, id, pos FROM (
  SELECT b.host || '/' || (g.value ->> 'bus_id') AS k, g.value ->> 'id' AS gpu_id, b.time, b.id, (g.n - 1)::integer AS pos
  FROM bundles b,
       jsonb_array_elements(CASE WHEN jsonb_typeof(b.summary::jsonb -> 'gpus') = 'array' THEN b.summary::jsonb -> 'gpus' ELSE '[]'::jsonb END)
         WITH ORDINALITY AS g(value, n)
  WHERE coalesce(g.value ->> 'bus_id', '') <> ''
    AND substr(g.value ->> 'id', 1, length(b.host) + 1) <> b.host || '/'
) named
ORDER BY k, time DESC, id DESC, pos DESC;
