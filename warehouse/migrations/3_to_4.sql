-- schema 3 → 4: queries.target may be NULL — a benchmark whose catalogue entry says `target: optional`
-- has no gold answers (its labels are imported); ingest still refuses a missing target everywhere else.
ALTER TABLE IF EXISTS queries ALTER COLUMN target DROP NOT NULL;
