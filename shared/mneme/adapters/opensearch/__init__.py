"""OpenSearch: the search index on AWS, derived from the records and rebuildable, on a managed domain
(`index`) or a Serverless collection (`serverless`)."""
