"""The embedded engine's SQLite files, standing in for DynamoDB and OpenSearch on one machine: the record
store of record (`store` and its parts) and the search index (`index`: FTS5 text, exact vectors cached in
memory by `vector_cache` and saved beside the file by `vector_snapshot`)."""
