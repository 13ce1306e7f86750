-- What a bucket report needs without loading every bundle (index.View),
-- and summaries kept as columns instead of one JSON document each:
--   evidence   whether the verdict found a cause, so that a signature's
--              first and last seen, total and evidence come from the
--              (sig_version, fine, time, evidence) index alone;
--   stacks     each software stack once (a fleet has a few), by id;
--   gpu_names  the name (UUID or serial) each host/bus id was last given.
ALTER TABLE bundles ADD COLUMN verdict TEXT NOT NULL DEFAULT '';
ALTER TABLE bundles ADD COLUMN evidence INTEGER NOT NULL DEFAULT 1;
ALTER TABLE bundles ADD COLUMN recomputed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bundles ADD COLUMN gpus TEXT NOT NULL DEFAULT 'null'; -- JSON: the summary's gpus
ALTER TABLE bundles ADD COLUMN stack_id INTEGER NOT NULL DEFAULT 0;

CREATE TABLE stacks (
  id    INTEGER PRIMARY KEY,
  stack TEXT NOT NULL UNIQUE -- JSON: component -> version, keys sorted
);
INSERT INTO stacks (stack) SELECT DISTINCT coalesce(json_extract(summary, '$.stack'), 'null') FROM bundles;

UPDATE bundles SET
  verdict = coalesce(json_extract(summary, '$.verdict'), ''),
  evidence = CASE WHEN coalesce(json_extract(summary, '$.verdict'), '') IN ('unknown', '') THEN 0 ELSE 1 END,
  recomputed = coalesce(json_extract(summary, '$.recomputed'), 0),
  gpus = coalesce(json_extract(summary, '$.gpus'), 'null'),
  stack_id = (SELECT s.id FROM stacks s WHERE s.stack = coalesce(json_extract(bundles.summary, '$.stack'), 'null'));

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
FROM bundles b, json_each(b.gpus) g
WHERE coalesce(json_extract(g.value, '$.bus_id'), '') <> ''
  AND substr(json_extract(g.value, '$.id'), 1, length(b.host) + 1) <> b.host || '/'
ON CONFLICT (alias_key) DO UPDATE SET gpu_id = excluded.gpu_id, time = excluded.time, bundle_id = excluded.bundle_id, pos = excluded.pos
  WHERE (excluded.time, excluded.bundle_id, excluded.pos) > (gpu_names.time, gpu_names.bundle_id, gpu_names.pos);

ALTER TABLE bundles DROP COLUMN summary;
DROP INDEX bundles_sig;
CREATE INDEX bundles_sig_time ON bundles(sig_version, fine, time, evidence);

-- Each signature's members, kept by Put: a report reads its window's
-- signatures here instead of aggregating every member ever indexed. The
-- latest member (by time, ties: the smallest id) gives the title.
CREATE TABLE signatures (
  sig_version INTEGER NOT NULL,
  fine        TEXT NOT NULL,
  first       INTEGER NOT NULL,
  last        INTEGER NOT NULL,
  last_id     TEXT NOT NULL,
  total       INTEGER NOT NULL,
  evidence    INTEGER NOT NULL,
  PRIMARY KEY (sig_version, fine)
);
INSERT INTO signatures (sig_version, fine, first, last, last_id, total, evidence)
SELECT g.sig_version, g.fine, g.first, g.last,
  (SELECT x.id FROM bundles x WHERE x.sig_version = g.sig_version AND x.fine = g.fine AND x.time = g.last ORDER BY x.id LIMIT 1),
  g.total, g.evidence
FROM (SELECT sig_version, fine, min(time) AS first, max(time) AS last, count(*) AS total, max(evidence) AS evidence
      FROM bundles GROUP BY sig_version, fine) g;
