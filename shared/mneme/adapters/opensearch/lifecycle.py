"""The OpenSearch index's lifecycle: its mapping (`index_body`), creating it, adding the fields the mapping
gained since, and reading its vector dimension and space; `IndexLifecycle`, the base of the adapter.

The mapping is `index_body(dimension)`: keyword filter fields, `text` with an English
stemming analyzer, `occurred_at` as a `date` (millisecond precision), `vector` as an HNSW `knn_vector`
(faiss, innerproduct), and, written by the Serverless subclass only,
`written_at` (epoch ms, the order of a document's copies) and `digest` (a content hash, neither indexed
nor aggregatable).

Why faiss + innerproduct. It is a mapping OpenSearch Serverless vector search collections support
("distance metrics such as Euclidean distance, cosine similarity, and dot product similarity",
https://docs.aws.amazon.com/opensearch-service/latest/developerguide/serverless-vector-search.html;
the CloudFormation `AWS::OpenSearchServerless::Index` schema lists engine faiss, method hnsw, space
innerproduct), and, unlike faiss cosinesimil, it needs no OpenSearch 2.19 engine. On unit vectors it ranks
exactly as cosine does. An index created earlier with cosinesimil keeps working: the space is read from
its mapping and its scores are converted with that space's formula.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Literal

from opensearchpy import OpenSearchException, TransportError

from mneme.adapters.opensearch.errors import index_missing, translate_error

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

Engine = Literal["faiss", "lucene"]

ANALYZER = "mneme_english"
SPACE = "innerproduct"  # on L2-normalised vectors: cosine ranking (module docstring, "Why faiss + innerproduct")


def index_body(dimension: int, *, engine: Engine = "faiss") -> dict[str, Any]:
    """Settings and mappings of the index, the one source of its mapping on both engines.

    The analyzer only names built-in components: the standard tokenizer, `apostrophe` (drops an
    apostrophe and what follows: "Alice's" -> "alice"), lowercase, ASCII folding (as the embedded
    index's unicode61 removes diacritics) and the Porter stemmer (as its `porter` tokenizer). There are
    no stopwords, so "and" or "not" are searchable words, as in the embedded index.
    `engine` is faiss (innerproduct on normalised vectors: a mapping Serverless supports, see the module
    docstring) or lucene; nmslib is not offered because it has no filtered kNN.
    """
    if dimension < 1:
        raise ValueError(f"dimension must be positive, not {dimension}")

    def keyword() -> dict[str, str]:  # a fresh dict per field: callers may edit the body
        return {"type": "keyword"}

    return {
        "settings": {
            "index": {"knn": True},
            "analysis": {
                "analyzer": {
                    ANALYZER: {
                        "type": "custom",
                        "tokenizer": "standard",
                        "filter": ["apostrophe", "lowercase", "asciifolding", "porter_stem"],
                    }
                }
            },
        },
        "mappings": {
            "dynamic": "strict",
            "properties": {
                "tenant": keyword(),
                "doc_id": keyword(),
                "kind": keyword(),
                "scope_id": keyword(),
                "ancestor_ids": keyword(),
                "text": {"type": "text", "analyzer": ANALYZER},
                "occurred_at": {"type": "date"},
                "tier": keyword(),
                "session_id": keyword(),
                "visible_to": keyword(),
                "model_id": keyword(),
                "metadata": keyword(),  # `search_models.metadata_terms`: one term a top-level metadata pair
                "written_at": {"type": "long"},  # serverless only: epoch ms, orders a document's copies
                "digest": {"type": "keyword", "index": False, "doc_values": False},  # serverless: content hash
                "vector": {
                    "type": "knn_vector",
                    "dimension": dimension,
                    "method": {
                        "name": "hnsw",
                        "engine": engine,
                        "space_type": SPACE,
                        "parameters": {"m": 16, "ef_construction": 128},
                    },
                },
            },
        },
    }


class IndexLifecycle:
    """One index of an OpenSearch domain or collection: created when missing and the dimension is known,
    its mapping read once. Thread-safe; the constructor does no I/O."""

    def __init__(self, client: OpenSearch, index_name: str, *, dimension: int | None = None) -> None:
        self.client = client
        self.index_name = index_name
        self._create_dimension = dimension
        self._dimension: int | None = None  # the index's, once known
        self._space = SPACE  # the vector field's space type, as its mapping says once read
        self._exists = False
        self._fields_added = False
        self._lock = threading.Lock()

    def _call(self, action: str, fn: Any, /, **kwargs: Any) -> Any:
        try:
            return fn(**kwargs)
        except OpenSearchException as exc:
            raise translate_error(exc, action) from exc

    def ensure_index(self, dimension: int) -> bool:
        """Create the index (`index_body(dimension)`) if it is missing; True if this call created it."""
        if self._call("checking the index", self.client.indices.exists, index=self.index_name):
            self._exists = True
            return False
        try:
            self.client.indices.create(index=self.index_name, body=index_body(dimension))
        except OpenSearchException as exc:
            if not (isinstance(exc, TransportError) and exc.error == "resource_already_exists_exception"):
                raise translate_error(exc, "creating the index") from exc
            self._exists = True
            return False
        self._exists = True
        self._dimension = dimension
        self._fields_added = True  # created with today's mapping
        return True

    def _ready(self) -> bool:
        """Whether the index exists, creating it when the dimension is known."""
        if self._exists:
            return True
        with self._lock:
            if not self._exists:
                if self._create_dimension is not None:
                    self.ensure_index(self._create_dimension)
                else:
                    self._exists = bool(
                        self._call("checking the index", self.client.indices.exists, index=self.index_name)
                    )
            return self._exists

    def _add_fields(self) -> None:
        """Before this process's first write, add to the index the fields its mapping gained since it was
        created (`metadata`): additive, so idempotent, and a strict mapping refuses documents carrying a field
        it lacks. A managed domain's index is the application's own (`ensure_index`)."""
        if not self._fields_added:
            mapping = {"properties": {"metadata": {"type": "keyword"}}}
            self._call("adding new fields to the mapping", self.client.indices.put_mapping, index=self.index_name,
                       body=mapping)  # fmt: skip
            self._fields_added = True

    def _vector_dimension(self) -> int | None:
        """The index's vector dimension (None when the index is missing or has no vector field)."""
        if self._dimension is None:
            try:
                mapping = self.client.indices.get_mapping(index=self.index_name)
            except OpenSearchException as exc:
                if index_missing(exc):
                    return self._create_dimension
                raise translate_error(exc, "reading the mapping") from exc
            for body in mapping.values():
                field = body.get("mappings", {}).get("properties", {}).get("vector", {})
                if field.get("dimension") is not None:
                    self._dimension = int(field["dimension"])
                    self._space = str(field.get("method", {}).get("space_type") or field.get("space_type") or SPACE)
        return self._dimension
