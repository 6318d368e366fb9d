"""recall: hybrid (vector + BM25) ranked search, a pipeline whose modules are its stages and rules.

`service` is the entry (the request, the response, `RecallService`); `run` the state every stage reads and
writes; `stages` lists the pipeline once (search → fuse → admit → lifecycle → fallback → time → select →
prerequisites → pack); the rules it calls: `records` (what is ranked, and its lifecycle), `context`, `hop`,
`scope`, `time` and `select`."""

from mneme.services.recall.service import RecallRequest, RecallResponse, RecallService, Scoring

__all__ = ["RecallRequest", "RecallResponse", "RecallService", "Scoring"]
