"""Broadcasting of symbolic dims (issue #13, docs/ir.md "Broadcasting"): inputs with different
dim_params that broadcast at run time (one of them 1) give what ONNX Runtime gives, with the
JIT off, compiling synchronously (so compiled kernels run, exact and shape-class versions) and
in verify mode; a pair that does not broadcast is an error naming the node, inputs and dims."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import stax

F = TensorProto.FLOAT


def make_model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "bcast", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def value(name, dims, dtype=F):
    return helper.make_tensor_value_info(name, dtype, dims)


def add_model(op="Add"):
    """y = a[N] op b[M]."""
    return make_model([helper.make_node(op, ["a", "b"], ["y"], name="add0")],
                      [value("a", ["N"]), value("b", ["M"])], [value("y", None)])


def chain_model():
    """A fused chain around the broadcast, so one JIT group reads a[N, K] and b[M, K]:
    y = relu(a * 2 + b) - a, s = the sum of y over its last axis."""
    two = helper.make_tensor("two", F, [], [2.0])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [-1])
    nodes = [
        helper.make_node("Mul", ["a", "two"], ["a2"], name="mul0"),
        helper.make_node("Add", ["a2", "b"], ["t"], name="add0"),
        helper.make_node("Relu", ["t"], ["r"], name="relu0"),
        helper.make_node("Sub", ["r", "a"], ["y"], name="sub0"),
        helper.make_node("ReduceSum", ["y", "axes"], ["s"], name="sum0", keepdims=0),
    ]
    return make_model(nodes, [value("a", ["N", "K"]), value("b", ["M", "K"])],
                      [value("y", None), value("s", None)], [two, axes])


def grid_model():
    """y = a[N, 1, K] + b[1, M, K], z = Where(c[N, M, 1] > 0, y, -y)."""
    zero = helper.make_tensor("zero", F, [], [0.0])
    nodes = [
        helper.make_node("Add", ["a", "b"], ["y"], name="add0"),
        helper.make_node("Greater", ["c", "zero"], ["mask"], name="gt0"),
        helper.make_node("Neg", ["y"], ["ny"], name="neg0"),
        helper.make_node("Where", ["mask", "y", "ny"], ["z"], name="where0"),
    ]
    return make_model(nodes, [value("a", ["N", 1, "K"]), value("b", [1, "M", "K"]),
                              value("c", ["P", "Q", 1])],
                      [value("y", None), value("z", None)], [zero])


def expand_model():
    """y = Expand(a[N, K], Shape(b[M, K])): both sides may be 1 (ONNX Expand is numpy
    broadcasting both ways)."""
    nodes = [
        helper.make_node("Shape", ["b"], ["shape"], name="shape0"),
        helper.make_node("Expand", ["a", "shape"], ["y"], name="expand0"),
    ]
    return make_model(nodes, [value("a", ["N", "K"]), value("b", ["M", "K"])],
                      [value("y", None)])


def reference(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def check(m, model, feeds):
    got = m(**feeds)
    want = reference(model, feeds)
    for name, expected in want.items():
        assert got[name].shape == expected.shape, (name, feeds)
        np.testing.assert_allclose(got[name], expected, rtol=1e-5, atol=1e-5, err_msg=name)


def feeds_for(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


MODES = [
    ("off", {}),
    ("sync", {}),
    ("sync", {"jit_verify": True}),
]


def load(model, mode, extra):
    return stax.load(model.SerializeToString(), options=stax.Options(jit=mode, **extra))


@pytest.mark.parametrize("mode,extra", MODES)
@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_one_dim_both_ways(mode, extra, op):
    model = add_model(op)
    m = load(model, mode, extra)
    # Several calls per shape, so compiled kernels (exact and class versions) run, and the
    # N == 1 and N == M shapes alternate in one process.
    for _ in range(3):
        for n, k in [(1, 5), (5, 1), (5, 5), (1, 1), (1, 5), (7, 7), (1, 7), (7, 1)]:
            check(m, model, feeds_for({"a": (n,), "b": (k,)}, n * 10 + k))


@pytest.mark.parametrize("mode,extra", MODES)
def test_fused_chain_alternating(mode, extra):
    model = chain_model()
    m = load(model, mode, extra)
    shapes = [(4, 4), (1, 4), (4, 1), (6, 6), (1, 6), (6, 1), (1, 1)]
    for _ in range(4):
        for n, k in shapes:
            check(m, model, feeds_for({"a": (n, 3), "b": (k, 3)}, n * 10 + k))
    if mode == "sync" and not extra:
        # One class version per pattern of ones (N == M, N == 1, M == 1, both 1), each
        # compiled on first sight, so every call ran compiled kernels: none was declined.
        stats = m.stats
        assert stats["generic_versions"] == 4
        assert stats["calls"] == {"compiled": len(shapes) * 4, "partial": 0, "interpreted": 0}


@pytest.mark.parametrize("mode,extra", MODES)
def test_grid_3d_and_where(mode, extra):
    model = grid_model()
    m = load(model, mode, extra)
    for _ in range(3):
        for n, k, mm in [(2, 3, 4), (1, 3, 4), (2, 3, 1), (1, 1, 1), (3, 2, 5)]:
            f = feeds_for({"a": (n, 1, k), "b": (1, mm, k), "c": (n, mm, 1)}, n + k + mm)
            check(m, model, f)
            # c broadcasting against y from the other side: c[1, 1, 1] and c[n, 1, 1]
            f["c"] = f["c"][:1, :1]
            check(m, model, f)


@pytest.mark.parametrize("mode,extra", MODES)
def test_expand_both_ways(mode, extra):
    model = expand_model()
    m = load(model, mode, extra)
    for _ in range(3):
        for n, k in [(1, 4), (4, 1), (4, 4), (1, 1)]:
            check(m, model, feeds_for({"a": (n, 2), "b": (k, 2)}, n + k))


def consumers_model():
    """What consumes a broadcast dim: Reshape to [-1], Transpose and a MatMul of t^T with t
    (contracting over bcast(N, M)), and a batched MatMul whose batch dims broadcast."""
    shape = helper.make_tensor("shape", TensorProto.INT64, [1], [-1])
    nodes = [helper.make_node("Add", ["a", "b"], ["t"], name="add0"),
             helper.make_node("Reshape", ["t", "shape"], ["r"], name="reshape0"),
             helper.make_node("Exp", ["r"], ["e"], name="exp0"),
             helper.make_node("Transpose", ["t"], ["tt"], name="tr0", perm=[1, 0]),
             helper.make_node("MatMul", ["tt", "t"], ["gram"], name="mm0"),
             helper.make_node("MatMul", ["x", "w"], ["batched"], name="mm1")]
    return make_model(nodes, [value("a", ["N", "K"]), value("b", ["M", "K"]),
                              value("x", ["P", 2, 3]), value("w", ["Q", 3, 4])],
                      [value("e", None), value("gram", None), value("batched", None)], [shape])


@pytest.mark.parametrize("mode,extra", MODES)
def test_consumers_of_broadcast_dims(mode, extra):
    model = consumers_model()
    m = load(model, mode, extra)
    for _ in range(3):
        for n, k in [(1, 5), (5, 1), (5, 5), (1, 1)]:
            check(m, model, feeds_for({"a": (n, 3), "b": (k, 3), "x": (k, 2, 3),
                                       "w": (n, 3, 4)}, n + k))
    with pytest.raises(stax.ShapeError) as info:
        m(**feeds_for({"a": (2, 3), "b": (2, 3), "x": (3, 2, 3), "w": (5, 3, 4)}))
    assert ("MatMul 'mm1': cannot broadcast input 0 'x' dim 0 (P = 3) with input 1 'w' dim 0 "
            "(Q = 5)") in str(info.value)


@pytest.mark.parametrize("mode,extra", MODES)
def test_incompatible_dims_are_a_clear_error(mode, extra):
    model = add_model()
    m = load(model, mode, extra)
    for _ in range(3):  # also after the valid shapes were compiled
        check(m, model, feeds_for({"a": (5,), "b": (5,)}))
        check(m, model, feeds_for({"a": (1,), "b": (5,)}))
        with pytest.raises(stax.ShapeError) as info:
            m(a=np.zeros(3, np.float32), b=np.zeros(5, np.float32))
        assert ("Add 'add0': cannot broadcast input 0 'a' dim 0 (N = 3) with input 1 'b' "
                "dim 0 (M = 5)") in str(info.value)


def test_incompatible_in_fused_chain_is_an_error():
    model = chain_model()
    m = load(model, "sync", {})
    for _ in range(3):
        check(m, model, feeds_for({"a": (4, 3), "b": (4, 3)}))
        with pytest.raises(stax.ShapeError, match="cannot broadcast"):
            m(**feeds_for({"a": (3, 3), "b": (5, 3)}))


def test_constants_that_contradict_fail_at_compile_time():
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"], name="add0")],
                       [value("a", [3]), value("b", [5])], [value("y", None)])
    with pytest.raises(stax.Error, match="cannot broadcast input 0 'a' dim 0 \\(3\\) with "
                                         "input 1 'b' dim 0 \\(5\\)"):
        stax.load(model.SerializeToString())


def test_equal_dims_stay_one_class_version():
    """The exporters' common case (equal dim_params) keeps one shape-class version for every
    batch size, 1 included: no broadcast dim, no extra class."""
    model = make_model([helper.make_node("Add", ["a", "b"], ["t"], name="add0"),
                        helper.make_node("Relu", ["t"], ["y"], name="relu0")],
                       [value("a", ["B", 8]), value("b", ["B", 8])], [value("y", None)])
    m = load(model, "sync", {})
    for b in [1, 2, 4, 8, 1, 2]:
        check(m, model, feeds_for({"a": (b, 8), "b": (b, 8)}, b))
    assert m.stats["generic_versions"] == 1


def test_saved_program_with_broadcast_dims(tmp_path):
    model = add_model()
    m = stax.load(model.SerializeToString(), jit="off")
    path = tmp_path / "bcast.stax"
    m.save(str(path))
    loaded = stax.load(str(path), jit="off")
    for n, k in [(1, 5), (5, 1), (5, 5)]:
        check(loaded, model, feeds_for({"a": (n,), "b": (k,)}))
    with pytest.raises(stax.ShapeError, match="cannot broadcast input 0 'a' dim 0 \\(N = 3\\)"):
        loaded(a=np.zeros(3, np.float32), b=np.zeros(5, np.float32))


def test_declared_output_dims_keep_the_broadcast():
    """Exporters declare output dims (here y[N] and value_info t[unk__0]); ONNX Runtime does
    not check them, and stax does not let them turn the broadcast back into N == M."""
    nodes = [helper.make_node("Add", ["a", "b"], ["t"], name="add0"),
             helper.make_node("Relu", ["t"], ["y"], name="relu0")]
    graph = helper.make_graph(nodes, "declared", [value("a", ["N"]), value("b", ["M"])],
                              [value("y", ["N"])], value_info=[value("t", ["unk__0"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    for mode, extra in MODES:
        m = load(model, mode, extra)
        for _ in range(3):
            for n, k in [(1, 5), (5, 1), (5, 5)]:
                check(m, model, feeds_for({"a": (n,), "b": (k,)}))


def test_distinct_dim_params_equal_in_practice():
    """Exporters often name one dim twice (input_ids[batch, seq], mask[batch_size, sequence]).
    Calls where the two are equal share one class version, whatever the value (a, b and the
    output are one row space there); only equal dims of 1 get a second one."""
    model = make_model([helper.make_node("Add", ["a", "b"], ["t"], name="add0"),
                        helper.make_node("Relu", ["t"], ["y"], name="relu0")],
                       [value("a", ["B1", 8]), value("b", ["B2", 8])], [value("y", None)])
    m = load(model, "sync", {})
    batches = [2, 4, 8, 3, 1, 2, 1]
    for b in batches:
        check(m, model, feeds_for({"a": (b, 8), "b": (b, 8)}, b))
    stats = m.stats
    assert stats["generic_versions"] == 2
    assert stats["calls"] == {"compiled": len(batches), "partial": 0, "interpreted": 0}


def test_cli_dis_and_run(stax_bin, tmp_path):
    """`stax dis` prints the broadcast dim; `stax compile` + `stax run` of the program file
    broadcast at run time."""
    import subprocess
    model = add_model()
    path = tmp_path / "add.onnx"
    path.write_bytes(model.SerializeToString())
    dis = subprocess.run([stax_bin, "dis", str(path)], capture_output=True, text=True)
    assert dis.returncode == 0, dis.stderr
    assert '"y": float32[bcast(N, M)]' in dis.stdout
    program = tmp_path / "add.stax"
    compiled = subprocess.run([stax_bin, "compile", str(path), "-o", str(program)],
                              capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    feeds = feeds_for({"a": (1,), "b": (5,)})
    args = [stax_bin, "run", str(program), "-o", str(tmp_path / "out")]
    for name, array in feeds.items():
        np.save(tmp_path / f"{name}.npy", array)
        args += ["-i", f"{name}={tmp_path / (name + '.npy')}"]
    ran = subprocess.run(args, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out" / "y.npy"), reference(model, feeds)["y"],
                               rtol=1e-6)


def test_dims_outside_broadcasts_do_not_split_classes():
    """Only dims that take part in a broadcast (N, M, bcast(N, M)) have their ones recorded in
    the class: K = 1 is no new class."""
    model = make_model([helper.make_node("Add", ["a", "b"], ["t"], name="add0"),
                        helper.make_node("Relu", ["t"], ["y"], name="relu0")],
                       [value("a", ["N", "K"]), value("b", ["M", "K"])], [value("y", None)])
    m = load(model, "sync", {})
    shapes = [(4, 8), (4, 1), (2, 1), (6, 3), (2, 8)]
    for n, k in shapes:
        check(m, model, feeds_for({"a": (n, k), "b": (n, k)}, n * 10 + k))
    stats = m.stats
    assert stats["generic_versions"] == 1
    assert stats["calls"] == {"compiled": len(shapes), "partial": 0, "interpreted": 0}
