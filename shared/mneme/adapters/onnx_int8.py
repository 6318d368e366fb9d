"""A dynamic-int8 copy of an ONNX encoder, derived from its file at first use and cached on disk.

The packaged all-MiniLM-L6-v2 stores its weights as int8 but dequantizes them (Cast + Mul) inside
the graph, so onnxruntime folds them back to fp32 and runs every MatMul in fp32. `derive` makes
the graph that runs them in int8 instead, from the packaged file alone (nothing is downloaded):

1. onnxruntime's own basic graph rewrites fold those constants (an fp32 graph);
2. `onnxruntime.quantization.quantize_dynamic` quantizes the MatMuls whose second input is a
   weight (an initializer: the 36 Q/K/V, attention-output and feed-forward projections), int8
   weights per output channel, activations quantized per call. The attention MatMuls (two
   activations) stay fp32: quantizing them too, or the weights per tensor, drifts much further
   from the packaged model's vectors.

Building costs a few seconds and the `onnx` package (the `local` extra), so the result is cached:
`<cache dir>/<key>-<digest>.onnx`, where the key hashes the source file's bytes, the onnxruntime
version and `RECIPE`, and the digest is the file's own SHA-256 (a file whose bytes do not match its
name is corrupt, and is rebuilt). Files are written to a temporary name and renamed into place,
so processes starting at once each see either nothing or a whole file. A cache directory that
cannot be written is not an error: the graph is then built in memory, in every process.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["RECIPE", "default_cache_dir", "derive", "load_or_derive"]

RECIPE = 1  # bump when `derive` changes what it writes: older cache files are then ignored

_log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/mneme/onnx`, else `~/.cache/mneme/onnx`."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "mneme" / "onnx"


def derive(source: bytes) -> bytes:
    """The dynamic-int8 graph of the ONNX model `source` (its serialized bytes)."""
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="mneme-int8-") as work:
        folded, quantized = Path(work) / "folded.onnx", Path(work) / "int8.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        options.log_severity_level = 3
        ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])
        graph = onnx.load(str(folded))
        weights = {init.name for init in graph.graph.initializer}
        projections = [n.name for n in graph.graph.node if n.op_type == "MatMul" and n.input[1] in weights]
        quantizer_log = logging.getLogger("root")  # onnxruntime.quantization warns through the root logger
        level = quantizer_log.level
        quantizer_log.setLevel(logging.ERROR)
        try:
            quantize_dynamic(
                graph,
                quantized,
                weight_type=QuantType.QInt8,
                per_channel=True,
                nodes_to_quantize=projections,
            )
        finally:
            quantizer_log.setLevel(level)
        return quantized.read_bytes()


def _key(source: bytes) -> str:
    import onnxruntime as ort

    tag = f"\0onnxruntime={ort.__version__}\0recipe={RECIPE}".encode()
    return hashlib.sha256(source + tag).hexdigest()[:24]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def load_or_derive(source: bytes, cache_dir: Path | None, build: Callable[[bytes], bytes] = derive) -> bytes:
    """The int8 graph of `source`: from `cache_dir` if a whole copy is there, else built (by
    `build`) and written there. `cache_dir=None` or a directory that cannot be written: built in
    memory and not kept."""
    if cache_dir is None:
        return build(source)
    key = _key(source)
    try:
        candidates = sorted(cache_dir.glob(f"{key}-*.onnx"))
    except OSError:
        candidates = []
    for path in candidates:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if path.stem == f"{key}-{_digest(data)}":
            return data
        _log.warning("rebuilding the int8 embedding model: %s is corrupt", path)
        path.unlink(missing_ok=True)
    data = build(source)
    try:
        _write_atomically(cache_dir / f"{key}-{_digest(data)}.onnx", data)
    except OSError as e:
        _log.warning("the int8 embedding model is not cached (%s): it is rebuilt by every process", e)
    return data


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
