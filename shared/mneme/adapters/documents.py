"""What every search index does to a document before it stores it, whichever engine it is: its vector at
unit length (`normalised_vector`), its times in UTC (`as_utc`)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
from numpy.typing import NDArray

from mneme.errors import InvalidInput
from mneme.search_models import IndexDocument


def as_utc(value: datetime) -> datetime:
    """Aware UTC; a naive datetime is taken to be UTC already."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def normalised_vector(doc: IndexDocument) -> NDArray[np.float32] | None:
    """The document's vector scaled to unit length (a zero vector stays zero), as float32."""
    if doc.vector is None:
        return None
    vec = np.asarray(doc.vector, dtype=np.float64)
    if vec.size == 0 or not np.isfinite(vec).all():
        raise InvalidInput(f"document {doc.doc_id} has an empty or non-finite vector")
    norm = np.linalg.norm(vec)
    return (vec / norm if norm > 0 else vec).astype(np.float32)
