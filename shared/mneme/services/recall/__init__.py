"""recall: hybrid (vector + BM25) ranked search, a pipeline whose modules are its stages and rules.

`request` is what it is asked and answers, `service` the entry (`RecallService`); `run` the state every stage reads and
writes; `stages` lists the pipeline once (search → fuse → admit → lifecycle → fallback → time → select →
prerequisites → pack); the rules it calls: `records` (what is ranked, and its lifecycle), `anchors` (what a hit must
share with the query), `prior` and `profile` (what a turn is worth), `context`, `hop`, `scope`, `time` and `select`."""

from mneme.services.recall.request import RecallRequest, RecallResponse, Scoring
from mneme.services.recall.service import RecallService

__all__ = ["RecallRequest", "RecallResponse", "RecallService", "Scoring"]
