-- The signatures ("v<version>:<fine>") a bundle had before it was read
-- again after a version bump or --recompute, oldest first, separated by
-- spaces: how a bucket of an old version maps to the new one.
ALTER TABLE bundles ADD COLUMN previous TEXT NOT NULL DEFAULT '';
