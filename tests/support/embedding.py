"""A deterministic, model-free `Embedder` for tests. Never use it outside tests."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

_WORD = re.compile(r"\w+")


class HashEmbedder:
    """Bag of hashed lowercase word tokens, L2-normalised.

    Texts that share words get a higher cosine than texts that do not; the same text always
    gets the same vector, in every process (blake2b, not the salted built-in `hash`). A text
    with no word characters maps to a fixed vector of its own.
    """

    def __init__(self, dimension: int = 64):
        if dimension < 1:
            raise ValueError("dimension must be >= 1")
        self.dimension = dimension
        self.model_id = f"hash-bow@{dimension}"

    def _bucket(self, token: str) -> int:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "big") % self.dimension

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = _WORD.findall(text.lower()) or [""]
            for token in tokens:
                out[row, self._bucket(token)] += 1.0
        out /= np.linalg.norm(out, axis=1, keepdims=True).clip(min=1e-12)
        return out
