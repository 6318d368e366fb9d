"""The ports' adapters, a package per engine they stand in for: `sqlite` (the embedded engine's records and
search index), `dynamo` (records on AWS), `opensearch` (search on AWS) and `models` (embedders and
reasoners); `secrets` (Secrets Manager) and `orchestrators` (Step Functions) are one module each, and
`documents` is what every search index does to a document (a unit vector, UTC times)."""
