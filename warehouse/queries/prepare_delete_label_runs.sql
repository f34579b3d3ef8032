-- Drop the label_runs rows of a label source (before it is written again). Parameter: source.
DELETE FROM label_runs WHERE source = ?
