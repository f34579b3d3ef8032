-- Labels of a source that cover the ingested queries for a list of models. Parameters: source, model ids.
SELECT count(*) FROM labels l JOIN queries q USING (query_id) WHERE l.source = ? AND list_contains(?, l.model_id)
