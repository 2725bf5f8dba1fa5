"""Classifier-style heads through the shape-generic matmul: N not a multiple of the register
tile's columns (1000 classes, odd widths) and batch sizes that leave rest rows (R % 6 or
R % 12 != 0), on 1 and 2 threads, with and without a bias (MatMul + Add, Gemm with transB),
every call against the interpreter. A build once left the rest rows' edge columns unwritten
on this path (ResNet-18's logits 992..999 at batch 4 on one thread)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import stax

RNG = np.random.default_rng(3)


def head(k, n, gemm):
    w = (RNG.standard_normal((n, k) if gemm else (k, n)) / np.sqrt(k)).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    if gemm:
        nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)]
    else:
        nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
                 helper.make_node("Add", ["m", "b"], ["y"])]
    graph = helper.make_graph(
        nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", n])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("k,n,gemm", [(512, 1000, True), (64, 181, False), (96, 1003, False),
                                      (40, 37, True), (1100, 1957, False)])
def test_head_matches_interpreter_over_batch_sizes(threads, k, n, gemm):
    data = head(k, n, gemm)
    compiled = stax.load(data, options=stax.Options(num_threads=threads, jit="sync"))
    reference = stax.load(data, jit="off")
    batches = [1, 2, 3, 4, 5, 7, 10, 11, 13, 16, 23, 29, 64, 97]
    for batch in batches:
        x = RNG.standard_normal((batch, k)).astype(np.float32)
        got, want = compiled(x=x)["y"], reference(x=x)["y"]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k),
                                   err_msg=f"batch {batch}")
    calls = compiled.stats["calls"]
    assert calls["compiled"] == len(batches), calls
