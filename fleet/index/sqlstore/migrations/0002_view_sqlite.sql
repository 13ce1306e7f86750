-- What a bucket report needs without loading every summary (index.View):
-- whether a bundle's verdict found a cause, an index that answers a
-- signature's first and last seen, total and evidence from the index alone,
-- and the name (UUID or serial) each host/bus id was last given.
ALTER TABLE bundles ADD COLUMN evidence INTEGER NOT NULL DEFAULT 1;
UPDATE bundles SET evidence = CASE WHEN coalesce(json_extract(summary, '$.verdict'), '') IN ('unknown', '') THEN 0 ELSE 1 END;
DROP INDEX bundles_sig;
CREATE INDEX bundles_sig_time ON bundles(sig_version, fine, time, evidence);

-- One row per host/bus id that a bundle named: the latest naming bundle's
-- (by time, then bundle id, then the GPU's position in it).
CREATE TABLE gpu_names (
  alias_key TEXT PRIMARY KEY, -- host/bus id
  gpu_id    TEXT NOT NULL,
  time      INTEGER NOT NULL,
  bundle_id TEXT NOT NULL,
  pos       INTEGER NOT NULL
);
INSERT INTO gpu_names (alias_key, gpu_id, time, bundle_id, pos)
SELECT b.host || '/' || json_extract(g.value, '$.bus_id'), json_extract(g.value, '$.id'), b.time, b.id, g.key
FROM bundles b, json_each(b.summary, '$.gpus') g
WHERE coalesce(json_extract(g.value, '$.bus_id'), '') <> ''
  AND substr(json_extract(g.value, '$.id'), 1, length(b.host) + 1) <> b.host || '/'
ON CONFLICT (alias_key) DO UPDATE SET gpu_id = excluded.gpu_id, time = excluded.time, bundle_id = excluded.bundle_id, pos = excluded.pos
  WHERE (excluded.time, excluded.bundle_id, excluded.pos) > (gpu_names.time, gpu_names.bundle_id, gpu_names.pos);
