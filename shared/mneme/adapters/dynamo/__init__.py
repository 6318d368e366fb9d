"""DynamoDB: the record store of record on AWS, one table (`store` composes the parts; `codec` and `table`
are the keys and the plumbing they share; `keys` is the authorizer's lookup alone)."""
