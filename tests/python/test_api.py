"""The Python API end to end: symbols, placeholders, expressions, compile and run, compared
with numpy on several shapes per compiled kernel; zero-copy inputs and outputs; kernel
introspection (bytecode, source, stats); threads; every op of ops.def has a builder."""
import math
import pathlib
import re
import threading
import time

import numpy as np
import pytest

from test_api_support import REPO, stax

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ---- symbols and dims ------------------------------------------------------------------------


def test_symbol_arithmetic_and_text():
    S = stax.symbol("S", min=1, max=4096)
    B = stax.symbol("B")
    assert repr(S) == "S" and (S.min, S.max) == (1, 4096)
    assert (B.min, B.max) == (1, None)
    assert (S * 2 + 1).evaluate(S=3) == 7
    assert (S - 1).evaluate(S=5) == 4
    assert (2 * S // 3).evaluate(S=4) == 2
    assert stax.ceildiv(S, 4).evaluate(S=5) == 2
    assert stax.dim_min(S, B).evaluate(S=3, B=2) == 2
    assert S + 0 is S and S * 1 is S and S * 0 == 0
    assert stax.symbol("S") == S and hash(stax.symbol("S")) == hash(S)
    assert str(S * 2 + 1) == "S*2 + 1"
    assert (S + B).symbols() == [S, B]


def test_symbol_errors():
    with pytest.raises(ValueError, match="empty range"):
        stax.symbol("S", min=5, max=2)
    with pytest.raises(ValueError, match="bad symbol name"):
        stax.symbol("2x")
    with pytest.raises(TypeError, match="not known until run time"):
        bool(stax.symbol("S") + 1)
    with pytest.raises(TypeError, match="use //"):
        stax.symbol("S") / 2


def test_placeholder_shapes_and_inference():
    B, S = stax.symbol("B"), stax.symbol("S", max=64)
    x = stax.placeholder([B, S, 16], name="x")
    assert x.shape == (B, S, 16) and x.dtype == "float32" and x.ndim == 3
    w = rand(16, 8)
    h = x @ w
    assert h.shape == (B, S, 8) and h.dtype == "float32"
    r = stax.reshape(h, [B, S * 8])
    assert r.shape[1] == S * 8
    assert r.shape[1].evaluate(S=3) == 24
    assert (x > 0).dtype == "bool"
    assert x[:, 1:].shape == (B, S - 1, 16)
    assert "float32[B, S, 16]" in repr(x)
    # string dims name symbols
    y = stax.placeholder(["N", 3], dtype="int64")
    assert y.shape[0] == stax.symbol("N") and y.dtype == "int64"


# ---- compile and run: values against numpy ---------------------------------------------------


SHAPES = [(1, 1), (2, 3), (5, 7), (4, 33)]


def test_elementwise_chain_many_shapes():
    B, S = stax.symbol("B"), stax.symbol("S")
    a = stax.placeholder([B, S], name="a")
    b = stax.placeholder([S], name="b")
    out = stax.relu(a * 2.5 + b) - stax.exp(-abs(a)) / (1 + b * b)
    k = stax.compile(out)
    for shape in SHAPES:
        av, bv = rand(*shape), rand(shape[1])
        expected = np.maximum(av * 2.5 + bv, 0) - np.exp(-np.abs(av)) / (1 + bv * bv)
        result = k(av, bv)
        assert result.dtype == np.float32 and result.shape == shape
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)
    assert k.stats["runs"] == len(SHAPES)


def test_python_scalars_take_the_tensor_dtype():
    x = stax.placeholder([3], dtype="float16", name="x")
    i = stax.placeholder([3], dtype="int32", name="i")
    k = stax.compile([x * 2 + 1, i * 3 - 1, i // 2, i % 3, 2 ** x])
    xv = np.array([1, 2, 3], np.float16)
    iv = np.array([-5, 4, 7], np.int32)
    a, b, c, d, e = k(xv, iv)
    assert a.dtype == np.float16 and b.dtype == np.int32
    np.testing.assert_array_equal(a, xv * 2 + 1)
    np.testing.assert_array_equal(b, iv * 3 - 1)
    np.testing.assert_array_equal(c, iv // 2)
    np.testing.assert_array_equal(d, iv % 3)
    np.testing.assert_allclose(e, 2.0 ** xv.astype(np.float32), rtol=1e-3)


def test_numpy_arrays_become_constants():
    x = stax.placeholder([2, 3], name="x")
    w = rand(3, 4)
    bias = rand(4)
    k = stax.compile(x @ w + bias)
    xv = rand(2, 3)
    expected = xv @ w + bias
    w[...] = 0  # constants are copied when the graph is built
    np.testing.assert_allclose(k(xv), expected, rtol=1e-5, atol=1e-6)
    ndarray_left = stax.compile(np.ones((2, 3), np.float32) - x)
    np.testing.assert_allclose(ndarray_left(xv), 1 - xv, rtol=1e-6)


def test_operators():
    x = stax.placeholder(["N"], name="x")
    y = stax.placeholder(["N"], name="y")
    k = stax.compile([x + y, x - y, x * y, x / y, x ** 2, -x, abs(x), x // y, x % y,
                      x < y, x <= y, x > y, x >= y, x == y, x != y,
                      (x > 0) & (y > 0), (x > 0) | (y > 0), (x > 0) ^ (y > 0), ~(x > 0),
                      3 - x, 2 / y, x @ y])
    xv = np.array([1.5, -2.0, 3.0, 0.5], np.float32)
    yv = np.array([2.0, -0.5, 3.0, 4.0], np.float32)
    got = k(xv, yv)
    expected = [xv + yv, xv - yv, xv * yv, xv / yv, xv ** 2, -xv, np.abs(xv), xv // yv,
                np.mod(xv, yv), xv < yv, xv <= yv, xv > yv, xv >= yv, xv == yv, xv != yv,
                (xv > 0) & (yv > 0), (xv > 0) | (yv > 0), (xv > 0) ^ (yv > 0), ~(xv > 0),
                3 - xv, 2 / yv, np.float32(xv @ yv)]
    for g, e in zip(got, expected):
        assert g.dtype == np.asarray(e).dtype, (g, e)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_indexing_and_slicing():
    B = stax.symbol("B")
    x = stax.placeholder([B, 6, 5], name="x")
    exprs = [x[0], x[-1], x[:, 1:4], x[:, ::-1], x[..., 2], x[None], x[:, 1:-1:2, None, 3],
             x[:, stax.placeholder([2], dtype="int64", name="idx")], x[1:B]]
    k = stax.compile(exprs)
    idx = np.array([4, 1], np.int64)
    for b in (2, 3):
        xv = rand(b, 6, 5)
        got = k(xv, idx)
        expected = [xv[0], xv[-1], xv[:, 1:4], xv[:, ::-1], xv[..., 2], xv[None],
                    xv[:, 1:-1:2, None, 3], xv[:, idx], xv[1:b]]
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0]


def test_reductions_and_normalizations():
    B = stax.symbol("B")
    x = stax.placeholder([B, 4, 6], name="x")
    scale, bias = rand(6), rand(6)
    outs = [stax.sum(x), stax.sum(x, axis=1), stax.mean(x, axis=(1, 2), keepdims=True),
            x.max(axis=-1), x.min(axis=0), stax.prod(x, axis=2), stax.argmax(x, axis=2),
            stax.argmin(x), stax.softmax(x, axis=-1), stax.log_softmax(x, axis=1),
            stax.layer_norm(x, scale, bias, axis=-1, epsilon=1e-5), stax.cumsum(x, axis=1),
            stax.reduce_l2(x, axis=2), stax.logsumexp(x, axis=-1)]
    k = stax.compile(outs)
    for b in (1, 3):
        xv = rand(b, 4, 6)
        got = k(xv)
        e = np.exp(xv - xv.max(-1, keepdims=True))
        mean = xv.mean(-1, keepdims=True)
        var = xv.var(-1, keepdims=True)
        lse1 = np.log(np.exp(xv).sum(1, keepdims=True))
        expected = [xv.sum(), xv.sum(1), xv.mean((1, 2), keepdims=True), xv.max(-1), xv.min(0),
                    xv.prod(2), xv.argmax(2), np.argmin(xv), e / e.sum(-1, keepdims=True),
                    xv - lse1, (xv - mean) / np.sqrt(var + 1e-5) * scale + bias,
                    xv.cumsum(1), np.sqrt((xv ** 2).sum(2)), np.log(np.exp(xv).sum(-1))]
        for g, want in zip(got, expected):
            assert g.shape == np.shape(want)
            np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5)


def test_activations():
    x = stax.placeholder(["N"], name="x")
    outs = [stax.gelu(x), stax.gelu(x, approximate="tanh"), stax.sigmoid(x), stax.tanh(x),
            stax.leaky_relu(x, 0.1), stax.elu(x), stax.softplus(x), stax.clip(x, -0.5, 0.5),
            stax.hard_sigmoid(x), stax.erf(x), stax.sqrt(abs(x)), stax.sign(x),
            stax.floor(x), stax.ceil(x), stax.round(x)]
    k = stax.compile(outs)
    xv = np.linspace(-3, 3, 25).astype(np.float32)
    erf = np.vectorize(math.erf)
    tanh_gelu = 0.5 * xv * (1 + np.tanh(np.sqrt(2 / np.pi) * (xv + 0.044715 * xv ** 3)))
    expected = [0.5 * xv * (1 + erf(xv / np.sqrt(2))), tanh_gelu, 1 / (1 + np.exp(-xv)),
                np.tanh(xv), np.where(xv > 0, xv, 0.1 * xv), np.where(xv > 0, xv, np.exp(xv) - 1),
                np.log1p(np.exp(xv)), np.clip(xv, -0.5, 0.5), np.clip(0.2 * xv + 0.5, 0, 1),
                erf(xv), np.sqrt(np.abs(xv)), np.sign(xv), np.floor(xv), np.ceil(xv),
                np.round(xv)]
    for g, e in zip(k(xv), expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_data_movement():
    B, S = stax.symbol("B"), stax.symbol("S")
    x = stax.placeholder([B, S, 4], name="x")
    y = stax.placeholder([B, S, 2], name="y")
    parts = stax.split(x, [1, 3], axis=2)
    outs = [stax.concat([x, y], axis=-1), stax.stack([x, x], axis=1), parts[0], parts[1],
            stax.transpose(x, [2, 0, 1]), x.T, stax.reshape(x, [B, S * 4]),
            stax.reshape(x, [-1, 4]), stax.expand_dims(x, 0), stax.squeeze(x[:, :1], 1),
            stax.expand(y[:, :1], [B, S, 2]), stax.tile(y, [1, 2, 1]),
            stax.pad(y, [(0, 0), (1, 0), (0, 2)]), stax.where(x > 0, x, -1.0),
            stax.gather(x, np.array([3, 0], np.int64), axis=2), stax.flatten(x, axis=1),
            stax.cast(x, "int32"), stax.shape(x), stax.size(y),
            stax.full([B, 2], 7.0), stax.zeros([S], "int64")]
    k = stax.compile(outs)
    for b, s in ((1, 1), (2, 3), (3, 5)):
        xv, yv = rand(b, s, 4), rand(b, s, 2)
        got = k(xv, yv)
        expected = [np.concatenate([xv, yv], -1), np.stack([xv, xv], 1), xv[..., :1],
                    xv[..., 1:], xv.transpose(2, 0, 1), xv.transpose(), xv.reshape(b, s * 4),
                    xv.reshape(-1, 4), xv[None], xv[:, 0], np.broadcast_to(yv[:, :1], (b, s, 2)),
                    np.tile(yv, (1, 2, 1)), np.pad(yv, [(0, 0), (1, 0), (0, 2)]),
                    np.where(xv > 0, xv, -1), xv[..., [3, 0]], xv.reshape(b, -1),
                    xv.astype(np.int32), np.array([b, s, 4]), np.int64(yv.size),
                    np.full((b, 2), 7, np.float32), np.zeros(s, np.int64)]
        for g, e in zip(got, expected):
            assert g.dtype == np.asarray(e).dtype
            np.testing.assert_array_equal(g, e)


def test_matmul_and_gemm():
    M, K = stax.symbol("M"), stax.symbol("K")
    a = stax.placeholder([M, K], name="a")
    b = stax.placeholder([K, 5], name="b")
    c = rand(5)
    k = stax.compile([a @ b, stax.gemm(a, b, c, alpha=0.5, beta=2.0),
                      stax.einsum("ij,jk->ik", a, b)])
    for m, kk in ((1, 1), (3, 4), (17, 9)):
        av, bv = rand(m, kk), rand(kk, 5)
        mm, gm, es = k(av, bv)
        np.testing.assert_allclose(mm, av @ bv, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gm, 0.5 * av @ bv + 2 * c, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(es, av @ bv, rtol=1e-4, atol=1e-5)


def test_convolution_and_pooling():
    N, H = stax.symbol("N"), stax.symbol("H", min=4)
    x = stax.placeholder([N, 2, H, H], name="x")
    w = rand(3, 2, 3, 3)
    b = rand(3)
    k = stax.compile([stax.conv(x, w, b, padding=1), stax.max_pool(x, 2, strides=2),
                      stax.avg_pool(x, 2, strides=2), stax.global_avg_pool(x)])
    for n, h in ((1, 4), (2, 6)):
        xv = rand(n, 2, h, h)
        conv, mp, ap, gap = k(xv)
        padded = np.pad(xv, [(0, 0), (0, 0), (1, 1), (1, 1)])
        ref = np.zeros((n, 3, h, h), np.float32)
        for i in range(h):
            for j in range(h):
                patch = padded[:, :, i:i + 3, j:j + 3]
                ref[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w) + b
        np.testing.assert_allclose(conv, ref, rtol=1e-4, atol=1e-4)
        blocks = xv.reshape(n, 2, h // 2, 2, h // 2, 2)
        np.testing.assert_allclose(mp, blocks.max((3, 5)), rtol=1e-6)
        np.testing.assert_allclose(ap, blocks.mean((3, 5)), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(gap, xv.mean((2, 3), keepdims=True), rtol=1e-5, atol=1e-6)


def test_data_dependent_outputs():
    x = stax.placeholder(["N"], name="x")
    values, indices = stax.topk(x, 2)
    k = stax.compile([values, indices, stax.nonzero(x > 0), stax.compress(x > 0, x)])
    xv = np.array([0.5, -1.0, 3.0, 2.0, -0.1], np.float32)
    v, i, nz, comp = k(xv)
    np.testing.assert_array_equal(v, [3.0, 2.0])
    np.testing.assert_array_equal(i, [2, 3])
    np.testing.assert_array_equal(nz, np.array(np.nonzero(xv > 0)))
    np.testing.assert_array_equal(comp, xv[xv > 0])


def test_every_ops_def_op_has_a_builder():
    names = [name for name, _ in stax._C.ops()]
    assert len(names) > 100
    for name in names:
        assert callable(getattr(stax.ops, name)), name
    assert set(names) == set(dir(stax.ops))
    from stax._ops import NUMPY_NAMES
    assert set(NUMPY_NAMES) == set(names)
    for onnx_name, function in NUMPY_NAMES.items():
        assert callable(getattr(stax, function)), (onnx_name, function)


def test_op_schema_matches_the_c_attribute_table():
    """python/stax/_optable.py lists each op's attributes; src/ir/op_attrs.def is the C truth."""
    table = REPO / "src" / "ir" / "op_attrs.def"
    if not table.exists():
        pytest.skip("source tree not available")
    from stax._optable import SCHEMAS
    declared = {}
    for op, name, kind in re.findall(r'^STAX_OP_ATTR\((\w+), "(\w+)", (\w+)\)', table.read_text(),
                                     re.M):
        declared.setdefault(op, {})[name] = kind
    for op, schema in SCHEMAS.items():
        python = {k: ("INT" if v == "DTYPE" else v) for k, v in schema.attrs.items()}
        assert python == declared.get(op, {}), op


def test_generic_builders_and_op():
    x = stax.placeholder([2, 3], name="x")
    k = stax.compile([stax.ops.LeakyRelu(x, alpha=0.2), stax.op("ReduceSum", x, [1], keepdims=0),
                      stax.ops.Split(x, num_outputs=3, axis=1)[2]])
    xv = rand(2, 3)
    lr, rs, last = k(xv)
    np.testing.assert_allclose(lr, np.where(xv > 0, xv, 0.2 * xv), rtol=1e-6)
    np.testing.assert_allclose(rs, xv.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(last, xv[:, 2:])
    with pytest.raises(TypeError, match="no input or attribute 'alhpa'"):
        stax.ops.LeakyRelu(x, alhpa=0.2)
    with pytest.raises(TypeError, match="missing input"):
        stax.ops.Add(x)
    with pytest.raises(stax.UnimplementedError):
        stax.op("NoSuchOp", x)


def test_control_flow_cond():
    x = stax.placeholder(["N"], name="x")
    p = stax.placeholder([], dtype="bool", name="p")
    out = stax.cond(p, lambda: x * 2, lambda: x - 1)
    k = stax.compile(out)
    xv = rand(4)
    np.testing.assert_allclose(k(xv, np.array(True)), xv * 2, rtol=1e-6)
    np.testing.assert_allclose(k(xv, np.array(False)), xv - 1, rtol=1e-6)


def test_control_flow_loop():
    x = stax.placeholder([3], name="x")
    # state: acc; body doubles acc 4 times
    final = stax.loop(lambda i, cond, acc: (cond, acc * 2), [x], max_trip_count=4)
    k = stax.compile(final)
    xv = rand(3)
    np.testing.assert_allclose(k(xv), xv * 16, rtol=1e-6)


# ---- kernels: inputs, outputs, calls -----------------------------------------------------------


def test_inputs_order_names_and_calls():
    a = stax.placeholder([2], name="a")
    b = stax.placeholder([2])
    c = stax.placeholder([2])
    k = stax.compile(a * 10 + c, inputs=[c, a])
    assert [i.name for i in k.inputs] == ["input_0", "a"]
    av, cv = np.array([1, 2], np.float32), np.array([3, 4], np.float32)
    np.testing.assert_array_equal(k(cv, av), [13, 24])
    np.testing.assert_array_equal(k(a=av, input_0=cv), [13, 24])
    np.testing.assert_array_equal(stax.run(k, [cv, av]), [13, 24])
    np.testing.assert_array_equal(stax.run(k, {"a": av, "input_0": cv}), [13, 24])
    # default inputs: reachable placeholders in creation order (b is not used)
    k2 = stax.compile(c - a)
    assert [i.name for i in k2.inputs] == ["a", "input_1"]
    single = stax.compile([a + 1])
    assert isinstance(single(av), tuple) and len(single(av)) == 1
    both = stax.compile([a + 1, a * 2])
    first, second = both(av)
    np.testing.assert_array_equal(second, av * 2)
    assert k.outputs[0].dtype == "float32" and k.outputs[0].shape == (2,)
    assert b.shape == (2,)
    # lists and scalars are converted to the input's dtype
    np.testing.assert_array_equal(k([3, 4], [1, 2]), [13, 24])


def test_kernel_description():
    S = stax.symbol("S", max=100)
    x = stax.placeholder([S, 4], name="x")
    # jit='off': every instruction runs in the interpreter, so the counts below are exact
    # (test_api_jit.py covers the JIT's source and statistics).
    k = stax.compile(stax.relu(x) + 1, profile_timing=True, jit="off")
    assert k.inputs == [stax.TensorInfo("x", "float32", ("S", 4))]
    assert k.outputs[0].shape == ("S", 4)
    text = k.bytecode
    assert "instructions (extended form)" in text and "compact form" in text
    assert "Relu" in text
    assert k.disassemble("extended") != k.disassemble("compact")
    assert k.source is None and "JIT is off" in k.source_unavailable_reason
    assert "x: float32[S, 4]" in k.graph
    assert k.target == "cpu" and "stax.Kernel" in repr(k)
    for n in (1, 2, 3):
        k(rand(n, 4))
    stats = k.stats
    for key in ("runs", "failed_runs", "contexts", "instruction_counts", "instruction_nanos",
                "segment_counts", "hits", "misses", "compiles", "failures", "evictions",
                "compile_time_s", "jit", "jit_mode", "jit_segments"):
        assert key in stats
    assert stats["jit"] is False and stats["jit_mode"] == "off"
    assert stats["runs"] == 3 and stats["failed_runs"] == 0
    assert stats["hits"] == stats["misses"] == stats["compiles"] == 0
    assert stats["compile_time_s"] == 0.0
    assert len(stats["instruction_counts"]) == len(stats["instruction_nanos"]) > 0
    assert max(stats["instruction_counts"]) == 3
    assert sum(stats["segment_counts"]) >= 3
    plain = stax.compile(x * 2)
    plain(rand(1, 4))
    assert plain.stats["instruction_nanos"] is None
    generic = stax.compile(x * 2, static_variants=False, profile=False, dispatch="switch")
    np.testing.assert_allclose(generic(np.ones((2, 4), np.float32)), 2)
    assert "PROFILE_POINT" not in generic.bytecode
    with pytest.raises(ValueError, match="dispatch"):
        stax.compile(x * 2, dispatch="fast")


# ---- zero copy ---------------------------------------------------------------------------------


def test_view_outputs_share_the_input_memory():
    B = stax.symbol("B")
    x = stax.placeholder([B, 4], name="x")
    k = stax.compile([stax.reshape(x, [-1]), x.T, stax.identity(x)])
    xv = np.arange(12, dtype=np.float32).reshape(3, 4)
    flat, transposed, same = k(xv)
    address = xv.__array_interface__["data"][0]
    for out in (flat, transposed, same):
        assert np.shares_memory(out, xv)
        assert out.__array_interface__["data"][0] == address
    xv[0, 1] = 100  # the outputs are views of the input
    assert flat[1] == 100 and transposed[1, 0] == 100 and same[0, 1] == 100


def test_strided_inputs_are_not_copied():
    x = stax.placeholder([3, 4], name="x")
    k = stax.compile([x.T, x * 1])
    base = np.arange(24, dtype=np.float32).reshape(3, 8)
    strided = base[:, ::2]
    assert not strided.flags["C_CONTIGUOUS"]
    view, scaled = k(strided)
    assert np.shares_memory(view, base)
    np.testing.assert_array_equal(view, strided.T)
    np.testing.assert_array_equal(scaled, strided)
    reversed_rows = base[::-1, :4]  # negative strides
    view, scaled = k(reversed_rows)
    assert np.shares_memory(view, base)
    np.testing.assert_array_equal(scaled, reversed_rows)


def test_unaligned_and_byteswapped_inputs_are_copied_not_rejected():
    x = stax.placeholder([4], name="x")
    k = stax.compile([stax.identity(x), x + 0])
    raw = np.zeros(4 * 4 + 1, np.uint8)
    unaligned = raw[1:].view(np.float32)
    unaligned[:] = [1, 2, 3, 4]
    assert unaligned.__array_interface__["data"][0] % 4 != 0
    same, plus = k(unaligned)
    np.testing.assert_array_equal(plus, [1, 2, 3, 4])
    assert not np.shares_memory(same, unaligned)
    swapped = np.array([1, 2, 3, 4], dtype=">f4")
    same, plus = k(swapped)
    np.testing.assert_array_equal(plus, [1, 2, 3, 4])


def test_outputs_are_writable_and_constants_are_not():
    x = stax.placeholder([3], name="x")
    table = np.array([1.0, 2.0, 3.0], np.float32)
    k = stax.compile([x + 1, stax.constant(table), stax.reshape(stax.constant(table), [3, 1])])
    out, const, view = k(np.zeros(3, np.float32))
    out[0] = 5  # an ordinary output belongs to the caller
    assert k.output_readonly == (False, True, True)
    assert not const.flags.writeable and not view.flags.writeable
    with pytest.raises(ValueError):
        const[0] = 10
    np.testing.assert_array_equal(k(np.zeros(3, np.float32))[1], table)


def test_output_lifetime_outlives_the_kernel():
    x = stax.placeholder([1000], name="x")
    k = stax.compile(x * 3)
    out = k(np.ones(1000, np.float32))
    del k
    import gc
    gc.collect()
    np.testing.assert_array_equal(out, 3)


def test_stax_tensor_objects():
    x = stax.placeholder([2, 3], name="x")
    k = stax.compile([x + 1, x.T])
    xv = rand(2, 3)
    plus, transposed = k.run([xv], numpy=False)
    assert isinstance(plus, stax.Tensor) and plus.shape == (2, 3) and plus.dtype == "float32"
    assert plus.ndim == 2 and plus.size == 6 and plus.itemsize == 4 and plus.nbytes == 24
    assert plus.is_contiguous and not transposed.is_contiguous
    assert transposed.strides == (4, 12)
    assert repr(plus) == "stax.Tensor(float32[2, 3])"
    np.testing.assert_allclose(np.asarray(plus), xv + 1)
    np.testing.assert_allclose(plus.numpy(), xv + 1)
    np.testing.assert_allclose(memoryview(transposed).tolist(), xv.T)
    interface = plus.__array_interface__
    assert interface["typestr"] == "<f4" and interface["shape"] == (2, 3)
    assert interface["data"][0] == plus.data_ptr
    assert len(plus) == 2
    # tensors are accepted as inputs directly
    np.testing.assert_allclose(k(plus)[0], xv + 2, rtol=1e-6)
    with pytest.raises(TypeError):
        stax.Tensor()


# ---- threads -----------------------------------------------------------------------------------


def test_calls_from_many_threads():
    B = stax.symbol("B")
    x = stax.placeholder([B, 64], name="x")
    w = rand(64, 64)
    k = stax.compile(stax.tanh(x @ w) + x)
    inputs = [rand(10 + i, 64) for i in range(8)]
    expected = [np.tanh(v @ w) + v for v in inputs]
    errors = []

    def work(i):
        try:
            for _ in range(20):
                np.testing.assert_allclose(k(inputs[i]), expected[i], rtol=1e-4, atol=1e-5)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    stats = k.stats
    assert stats["runs"] == 160
    assert 1 <= stats["contexts"] <= 8


def test_the_gil_is_released_while_running():
    n = 768
    x = stax.placeholder([n, n], name="x")
    k = stax.compile(x @ x @ x @ x)
    xv = rand(n, n) / n
    start = time.perf_counter()
    k(xv)
    single = time.perf_counter() - start
    done = threading.Event()
    ticks = [0]

    def run():
        for _ in range(3):
            k(xv)
        done.set()

    worker = threading.Thread(target=run)
    worker.start()
    while not done.is_set():
        ticks[0] += 1
        time.sleep(0)
    worker.join()
    # With the GIL held for the whole run this loop would barely advance.
    assert ticks[0] > 50 or single < 0.002


def test_more_op_families():
    N = stax.symbol("N")
    z = stax.placeholder([N], name="z")
    m = stax.placeholder([3, 3], name="m")
    img = stax.placeholder([1, 4, 2, 2], name="img")
    logits = stax.placeholder([2, 3], name="logits")
    u = stax.placeholder([2], dtype="uint8", name="u")
    labels = np.array([0, 2])
    outs = [stax.arange(N), stax.arange(0, N, 2), stax.triu(m, 1), stax.tril(m),
            stax.one_hot(labels, 3), stax.scatter_elements(z, np.array([0, 2]), np.array([9., 8.], np.float32)),
            stax.dropout(z), stax.hardmax(z), stax.isinf(z / 0.0), stax.cast_like(z, np.zeros(1, np.int32)),
            stax.mean_n(z, z * 3), stax.maximum(z, 0.5, z - 1), stax.depth_to_space(img, 2),
            stax.space_to_depth(stax.depth_to_space(img, 2), 2), stax.eye_like(m, k=1),
            stax.gather_nd(m, np.array([[0, 1], [2, 0]])),
            stax.nll_loss(stax.log_softmax(logits), labels),
            stax.softmax_cross_entropy(logits, labels), stax.bitwise_left_shift(u, np.uint8(1)),
            stax.resize(img, scales=[1, 1, 2, 2]),
            stax.batch_norm(img, np.full(4, 2, np.float32), np.ones(4, np.float32),
                            np.zeros(4, np.float32), np.ones(4, np.float32), epsilon=0.0),
            stax.instance_norm(img, np.ones(4, np.float32), np.zeros(4, np.float32), epsilon=0.0)]
    k = stax.compile(outs)
    zv = np.array([1.0, -2.0, 3.0, 0.5], np.float32)
    mv = np.arange(9, dtype=np.float32).reshape(3, 3)
    iv = np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2)
    lv = rand(2, 3)
    uv = np.array([1, 3], np.uint8)
    got = k(zv, mv, iv, lv, uv)
    log_probs = lv - np.log(np.exp(lv).sum(1, keepdims=True))
    nll = -log_probs[[0, 1], labels].mean()
    d2s = iv.reshape(1, 2, 2, 1, 2, 2).transpose(0, 3, 4, 1, 5, 2).reshape(1, 1, 4, 4)
    centered = iv - iv.mean((2, 3), keepdims=True)
    with np.errstate(divide="ignore"):
        infinite = np.isinf(zv / 0.0)
    expected = [np.arange(4), np.arange(0, 4, 2), np.triu(mv, 1), np.tril(mv), np.eye(3)[labels],
                np.array([9, -2, 8, 0.5]), zv, np.eye(4)[np.argmax(zv)], infinite,
                zv.astype(np.int32), zv * 2, np.maximum(np.maximum(zv, 0.5), zv - 1), d2s, iv,
                np.eye(3, k=1), mv[[0, 2], [1, 0]], nll, nll, uv << 1,
                iv.repeat(2, axis=2).repeat(2, axis=3), iv * 2 + 1,
                centered / np.sqrt((centered ** 2).mean((2, 3), keepdims=True))]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, np.asarray(e).astype(g.dtype), rtol=1e-5, atol=1e-5)


def test_repeated_outputs():
    x = stax.placeholder([3], name="x")
    y = x + 1
    a, b, c, d = stax.compile([y, y, x, x])(np.ones(3, np.float32))
    np.testing.assert_array_equal(a, b)  # may be views of one tensor, like numpy views
    np.testing.assert_array_equal(c, 1)
    np.testing.assert_array_equal(d, 1)


def test_save_and_load_program(tmp_path):
    S = stax.symbol("S")
    x = stax.placeholder([S, 2], name="x")
    k = stax.compile(stax.relu(x) * 3)
    path = tmp_path / "kernel.stax"
    try:
        k.save(str(path))
    except stax.UnimplementedError:
        pytest.skip("this build of the library cannot save programs")
    loaded = stax.load_program(str(path))
    from_bytes = stax.load_program(k.serialize())
    xv = rand(5, 2)
    np.testing.assert_allclose(loaded(xv), k(xv))
    np.testing.assert_allclose(from_bytes(xv), k(xv))
    assert loaded.inputs == k.inputs and loaded.graph is None
