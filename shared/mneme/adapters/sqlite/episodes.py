"""How the embedded store keeps an episode in its row: the JSON document, the `indexed` flag and the vector.

The document leaves out the vector and the flag. The vector is a BLOB of float64 (exact for any float;
3 KB for 384 dimensions against ~7.7 KB as JSON text, which also cost a float parse each on every read),
so the document stays small: marking an episode indexed rewrites one integer in place, not its vector,
and a read that needs no vector never decodes one. The `indexed` column is the flag's only truth. Rows
written before this layout keep both inside the document (and a NULL vector column): they read the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mneme.models import Episode

COLUMNS = "doc, indexed, vector"  # what `from_row` reads, in this order
INSERT = (
    "INSERT INTO episodes (tenant, episode_id, seq, indexed, created_at, scope_id, doc, vector) "
    "VALUES (?,?,?,?,?,?,?,?)"
)
_VECTOR_KEY = '"vector":'


def to_row(episode: Episode, seq: int, created_at: str) -> tuple[object, ...]:
    """The values of `INSERT` for `episode`."""
    vector = None if episode.vector is None else np.asarray(episode.vector, dtype=np.float64).tobytes()
    doc = episode.model_dump_json(exclude={"vector", "indexed"})
    return episode.tenant, episode.episode_id, seq, int(episode.indexed), created_at, episode.scope_id, doc, vector


def from_row(row: Sequence[object], *, vector: bool = True) -> Episode:
    """The episode of a row's `COLUMNS`; `vector=False` leaves its vector out (None) unread."""
    doc, indexed, blob = row
    assert isinstance(doc, str)
    episode = Episode.model_validate_json(doc if vector and blob is None else _without_vector(doc))
    update: dict[str, object] = {"indexed": bool(indexed)}
    if vector and isinstance(blob, bytes):
        update["vector"] = np.frombuffer(blob, np.float64).tolist()
    return episode.model_copy(update=update)


def _without_vector(doc: str) -> str:
    """An older row's JSON with its vector's floats left out (`"vector":null`): parsing them is ~80 % of
    `model_validate_json`'s cost. Only when the key occurs once, which makes it the top-level field
    (`model_dump_json` always wrote it; a quote inside a string is escaped, so only a nested dict key
    named "vector" could repeat it, and then the document is parsed whole)."""
    at = doc.find(_VECTOR_KEY + "[")
    if at < 0 or doc.count(_VECTOR_KEY) != 1:
        return doc
    end = doc.find("]", at)  # the list holds numbers only
    return doc[: at + len(_VECTOR_KEY)] + "null" + doc[end + 1 :]
