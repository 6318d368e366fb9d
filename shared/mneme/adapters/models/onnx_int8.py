"""A dynamic-int8 copy of an ONNX encoder, derived from its file at first use and cached on disk.

The packaged all-MiniLM-L6-v2 stores its weights as int8 but dequantizes them (Cast + Mul) inside
the graph, so onnxruntime folds them back to fp32 and runs every MatMul in fp32. `derive` makes
the graph that runs them in int8 instead, from the packaged file alone (nothing is downloaded):

1. onnxruntime's own basic graph rewrites fold those constants (an fp32 graph), and each GELU,
   written out as five elementwise nodes, becomes onnxruntime's one `Gelu` node;
2. every MatMul whose second input is a 2-D weight (an initializer: in MiniLM the 36 Q/K/V,
   attention-output and feed-forward projections) becomes onnxruntime's int8 `MatMulIntegerToFloat`
   (com.microsoft): the weight quantized per output column, symmetric (8 bits on a CPU with VNNI,
   else 7: `weight_levels`), its scales applied inside the product; the activations quantized per
   call and per row (per token), symmetric around the zero point 128, by one `QuantizeLinear` over
   the rows after their absolute maxima are found; the product is then scaled by the rows' scales.
   The attention MatMuls (two activations) stay fp32.

Per-row activation scales make a text's vector independent of the texts batched with it (one
scale for the whole batch, as `onnxruntime.quantization.quantize_dynamic` makes, moved vectors by
up to cosine 0.04 with their batch-mates) and keep it within cosine ~0.998 of the packaged
graph's, at ~3 % more CPU than per-batch scales (docs/embeddings.md). Recipe 4 (the fused product and
`QuantizeLinear`, in place of MatMulInteger, a Cast, two Muls, and a Mul, an Add and a Cast per activation)
runs ~10 % more texts per CPU-second than recipe 3, as close to the packaged vectors.

Building costs ~1 s of CPU and the `onnx` package (the `local` extra), so the result is cached:
`<cache dir>/<key>-<digest>.onnx`, where the key hashes the source file's bytes, the onnxruntime
version, `RECIPE` and the weights' bits, and the digest is the file's own SHA-256 (a file whose
bytes do not match its name is corrupt, and is rebuilt). Files are written to a temporary name and renamed into place,
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
from typing import Any

import numpy as np

__all__ = ["RECIPE", "default_cache_dir", "derive", "load_or_derive", "weight_levels"]

RECIPE = 4  # bump when `derive` changes what it writes: older cache files are then ignored

_log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/mneme/onnx`, else `~/.cache/mneme/onnx`."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base).expanduser() if base else Path.home() / ".cache") / "mneme" / "onnx"


def weight_levels() -> int:
    """The largest |weight| of the quantized weights: 127 (8 bits) on an x86 CPU with VNNI, else 63
    (7 bits). Without VNNI, onnxruntime's AVX2 kernel adds pairs of uint8 x int8 products in int16,
    which 8-bit weights can overflow (255 x 127 x 2 > 32767); 7-bit ones cannot. Measured on the
    bench episodes: mean cosine to the packaged vectors 0.998 with 8 bits, 0.996 with 7."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), [])
    except OSError:
        return 63
    return 127 if {"avx512_vnni", "avx_vnni"} & set(flags) else 63


def derive(source: bytes, levels: int = 63) -> bytes:
    """The int8 graph of the ONNX model `source` (its serialized bytes), weights in -levels..levels."""
    import onnx

    model = _folded(source)
    graph = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)
    rewrite = _Rewrite(graph, opset, levels)
    nodes = _fuse_gelu(graph)
    del graph.node[:]
    for node in nodes:
        graph.node.extend(rewrite.matmul(node) if rewrite.quantizable(node) else [node])
    used = {name for node in graph.node for name in node.input}
    kept = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept + rewrite.initializers)
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def _fuse_gelu(graph: Any) -> list[Any]:
    """`graph`'s nodes with each exact GELU written out, x * 0.5 * (1 + erf(x / sqrt 2)) (five
    elementwise passes over the feed-forward activations), replaced by onnxruntime's one `Gelu`
    (com.microsoft; the same erf formula)."""
    from onnx import helper, numpy_helper

    constants = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def constant(node: Any, value: float) -> str | None:
        """The input of a two-input `node` that is not the scalar constant `value`."""
        for mine, other in ((0, 1), (1, 0)):
            c = constants.get(node.input[mine])
            if c is not None and c.size == 1 and abs(float(c) - value) < 1e-6:
                return str(node.input[other])
        return None

    def only_consumer(name: str, op: str) -> Any:
        found = consumers.get(name, [])
        return found[0] if len(found) == 1 and found[0].op_type == op and not found[0].domain else None

    replaced: dict[int, Any] = {}  # id of the last node of a chain -> its Gelu; other chain nodes -> None
    for erf in (n for n in graph.node if n.op_type == "Erf" and not n.domain):
        div = producer.get(erf.input[0])
        x = constant(div, 2**0.5) if div is not None and div.op_type == "Div" else None
        plus = only_consumer(erf.output[0], "Add")
        half = only_consumer(plus.output[0], "Mul") if plus is not None and constant(plus, 1.0) else None
        last = only_consumer(half.output[0], "Mul") if half is not None and constant(half, 0.5) else None
        if x is None or div is None or last is None or div.input[0] != x or x not in last.input:
            continue
        gelu = helper.make_node("Gelu", [x], list(last.output), domain="com.microsoft", name=f"{last.name}/gelu")
        for node in (div, erf, plus, half):
            replaced[id(node)] = None
        replaced[id(last)] = gelu
    return [replaced.get(id(node), node) for node in graph.node if replaced.get(id(node), node) is not None]


def _folded(source: bytes) -> Any:
    """`source` after onnxruntime's basic rewrites (constant folding), as an `onnx.ModelProto`."""
    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="mneme-int8-") as work:
        folded = Path(work) / "folded.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(folded)
        options.log_severity_level = 3
        ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])
        return onnx.load(str(folded))


class _Rewrite:
    """Replaces weight MatMuls by int8 ones; quantizes each activation once (Q, K and V share one)."""

    PREFIX = "mneme_int8/"

    def __init__(self, graph: Any, opset: int, levels: int) -> None:
        from onnx import numpy_helper

        self.weights = {init.name: init for init in graph.initializer}
        self.opset = opset
        self.levels = levels
        self.activations: dict[str, tuple[str, str]] = {}  # activation -> (its uint8 copy, its row scales)
        self.count = 0
        constants = {"inv_max": 1 / 127, "eps": 1e-12, "one": 1.0}
        self.initializers = [
            numpy_helper.from_array(np.array(value, np.float32), self.PREFIX + name)
            for name, value in constants.items()
        ]
        self.initializers += [
            numpy_helper.from_array(np.array(128, np.uint8), self.PREFIX + "zero_point"),
            numpy_helper.from_array(np.array([-1], np.int64), self.PREFIX + "rows"),
        ]
        if opset >= 18:  # ReduceMax/ReduceMin take their axes as an input from opset 18 on
            self.initializers.append(numpy_helper.from_array(np.array([-1], np.int64), self.PREFIX + "last_axis"))

    def quantizable(self, node: Any) -> bool:
        from onnx import TensorProto

        weight = self.weights.get(node.input[1]) if node.op_type == "MatMul" and not node.domain else None
        return weight is not None and len(weight.dims) == 2 and weight.data_type == TensorProto.FLOAT

    def matmul(self, node: Any) -> list[Any]:
        from onnx import helper, numpy_helper

        weight = numpy_helper.to_array(self.weights[node.input[1]]).astype(np.float32)
        column_scale = np.maximum(np.abs(weight).max(axis=0), 1e-12) / self.levels
        quantized = np.clip(np.round(weight / column_scale), -self.levels, self.levels).astype(np.int8)
        name = f"{self.PREFIX}matmul{self.count}"
        self.count += 1
        self.initializers += [
            numpy_helper.from_array(quantized, name + "/weight"),
            numpy_helper.from_array(column_scale.astype(np.float32), name + "/column_scale"),
        ]
        nodes = self._quantize(node.input[0])
        x_uint8, row_scale = self.activations[node.input[0]]
        c = self.PREFIX
        product = helper.make_node(  # (x - 128) . weight x the columns' scales (A's scale: 1)
            "MatMulIntegerToFloat",
            [x_uint8, name + "/weight", c + "one", name + "/column_scale", c + "zero_point"],
            [name + "/columns"],
            domain="com.microsoft",
        )
        return [*nodes, product, helper.make_node("Mul", [name + "/columns", row_scale], [node.output[0]])]

    def _quantize(self, x: str) -> list[Any]:
        """Nodes making x's uint8 copy (per row: round(x * 127 / max|row|) + 128, onto 1..255) and the
        rows' scales (max|row| / 127, shaped to broadcast over the product): `QuantizeLinear` per axis
        over x seen as rows (Flatten), with one zero point a row, then back to x's shape."""
        from onnx import helper

        if x in self.activations:
            return []
        c, name = self.PREFIX, f"{self.PREFIX}act{len(self.activations)}"
        self.activations[x] = (name + "/uint8", name + "/scale")
        return [
            self._reduce("ReduceMax", x, name + "/hi"),
            self._reduce("ReduceMin", x, name + "/lo"),
            helper.make_node("Neg", [name + "/lo"], [name + "/minus_lo"]),
            helper.make_node("Max", [name + "/hi", name + "/minus_lo", c + "eps"], [name + "/absmax"]),
            helper.make_node("Mul", [name + "/absmax", c + "inv_max"], [name + "/scale"]),
            helper.make_node("Flatten", [x], [name + "/rows"], axis=-1),
            helper.make_node("Reshape", [name + "/scale", c + "rows"], [name + "/row_scales"]),
            helper.make_node("Shape", [name + "/row_scales"], [name + "/count"]),
            helper.make_node("Expand", [c + "zero_point", name + "/count"], [name + "/zero_points"]),
            helper.make_node(
                "QuantizeLinear",
                [name + "/rows", name + "/row_scales", name + "/zero_points"],
                [name + "/uint8_rows"],
                axis=0,
            ),
            helper.make_node("Shape", [x], [name + "/shape"]),
            helper.make_node("Reshape", [name + "/uint8_rows", name + "/shape"], [name + "/uint8"]),
        ]

    def _reduce(self, op: str, x: str, out: str) -> Any:
        from onnx import helper

        if self.opset >= 18:
            return helper.make_node(op, [x, self.PREFIX + "last_axis"], [out], keepdims=1)
        return helper.make_node(op, [x], [out], axes=[-1], keepdims=1)


def _key(source: bytes, levels: int) -> str:
    import onnxruntime as ort

    tag = f"\0onnxruntime={ort.__version__}\0recipe={RECIPE}\0levels={levels}".encode()
    return hashlib.sha256(source + tag).hexdigest()[:24]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


def load_or_derive(
    source: bytes,
    cache_dir: Path | None,
    levels: int | None = None,
    build: Callable[[bytes, int], bytes] = derive,
) -> bytes:
    """The int8 graph of `source` with weights in -levels..levels (default: `weight_levels()` of
    this CPU): from `cache_dir` if a whole copy is there, else built (by `build`) and written
    there. `cache_dir=None` or a directory that cannot be written: built in memory, not kept."""
    levels = levels or weight_levels()
    if cache_dir is None:
        return build(source, levels)
    key = _key(source, levels)
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
    data = build(source, levels)
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
