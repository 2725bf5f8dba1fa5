"""The quantization ops (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv) through ONNX import: each op against
onnx.reference.ReferenceEvaluator and numpy at every opset that changed it (per-tensor,
per-axis with positive and negative axes, blocked with and without a short last block, every
integer type, rounding ties, saturation), ONNX Runtime where it implements the op, the errors
(each a status naming the node, the input and the dim; nothing aborts), results unchanged with
the JIT on, and whole models quantized by onnxruntime.quantization (quantize_dynamic, and
quantize_static in QDQ and QOperator form) matching ONNX Runtime."""
import numpy as np
import pytest

from test_api_support import stax

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

RNG = np.random.default_rng(2013)


def _cpu_has_vnni():
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags


# ONNX Runtime's uint8 x int8 MatMulInteger on x86 without VNNI multiplies with vpmaddubsw,
# whose int16 pair sums saturate: its results are then not exact (seen on AVX2-only Zen 3),
# so the comparison with it is made only where it is (the exact references stay for all).
ORT_U8S8_EXACT = _cpu_has_vnni()

NP_TO_ONNX = {np.dtype(k): v for k, v in [
    (np.float32, TensorProto.FLOAT), (np.float16, TensorProto.FLOAT16),
    (np.float64, TensorProto.DOUBLE), (np.int8, TensorProto.INT8),
    (np.uint8, TensorProto.UINT8), (np.int16, TensorProto.INT16),
    (np.uint16, TensorProto.UINT16), (np.int32, TensorProto.INT32)]}


def model(nodes, inputs, outputs, inits=(), opset=21):
    """inputs: {name: (array or dtype, declared shape)}; outputs: {name: onnx type}."""
    graph = helper.make_graph(
        nodes, "quant",
        [helper.make_tensor_value_info(n, NP_TO_ONNX[np.dtype(d)], s)
         for n, (d, s) in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 10)
    return m


def run_stax(m, feeds, **options):
    return stax.load(m.SerializeToString(), **options)(**feeds)


def run_reference(m, feeds):
    """The ONNX reference. It has no DequantizeLinear before opset 19; 19 computes the same
    for the types older opsets allow, so older models run there."""
    if m.opset_import[0].version < 19 and any(n.op_type == "DequantizeLinear"
                                              for n in m.graph.node):
        m = onnx.ModelProto.FromString(m.SerializeToString())
        m.opset_import[0].version = 19
    return ReferenceEvaluator(m).run(None, feeds)


def run_ort(m, feeds, optimize=True):
    options = ort.SessionOptions()
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(m.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def quantize_node(opset, x_shape, scale, zero, out_type, x_dtype=np.float32, **attrs):
    inits = [("s", scale)] + ([("z", zero)] if zero is not None else [])
    node = helper.make_node("QuantizeLinear", ["x", "s"] + (["z"] if zero is not None else []),
                            ["y"], name="quant", **attrs)
    return model([node], {"x": (x_dtype, list(x_shape))}, {"y": out_type}, inits, opset)


# ---- QuantizeLinear / DequantizeLinear ---------------------------------------------------------

INT_TYPES = [(np.int8, TensorProto.INT8), (np.uint8, TensorProto.UINT8),
             (np.int16, TensorProto.INT16), (np.uint16, TensorProto.UINT16)]


def random_zero(dtype, shape):
    info = np.iinfo(dtype)
    low, high = max(info.min, -100), min(info.max, 100)
    return RNG.integers(low, high + 1, size=shape).astype(dtype)


@pytest.mark.parametrize("opset", [10, 13, 19, 21, 23, 25])
def test_quantize_per_tensor_every_opset(opset):
    x = (RNG.standard_normal((3, 4, 5)) * 40).astype(np.float32)
    for scale, zero in [(np.float32(0.3), np.uint8(128)), (np.array([0.25], np.float32),
                                                           np.array([-3], np.int8))]:
        m = quantize_node(opset, x.shape, scale, zero, NP_TO_ONNX[zero.dtype])
        got = run_stax(m, {"x": x})["y"]
        want = run_reference(m, {"x": x})[0]
        assert got.dtype == want.dtype and np.array_equal(got, want)
        assert np.array_equal(got, run_ort(m, {"x": x})[0])


@pytest.mark.parametrize("opset", [13, 19, 21, 23])
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_quantize_dequantize_per_axis(opset, axis):
    shape = (3, 4, 5)
    x = (RNG.standard_normal(shape) * 10).astype(np.float32)
    n = shape[axis]
    scale = (RNG.random(n) * 0.2 + 0.01).astype(np.float32)
    zero = random_zero(np.int8, n)
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=axis, name="quant")
    d = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], axis=axis, name="dequant")
    m = model([q, d], {"x": (np.float32, list(shape))},
              {"q": TensorProto.INT8, "d": TensorProto.FLOAT}, [("s", scale), ("z", zero)], opset)
    got = run_stax(m, {"x": x})
    want = run_reference(m, {"x": x})
    assert np.array_equal(got["q"], want[0])
    assert np.array_equal(got["d"], want[1])
    ort_q, ort_d = run_ort(m, {"x": x})
    assert np.array_equal(got["q"], ort_q) and np.array_equal(got["d"], ort_d)


@pytest.mark.parametrize("np_type,onnx_type", INT_TYPES)
@pytest.mark.parametrize("shape,axis,block", [((4, 8), 1, 4), ((4, 7), 1, 3), ((6, 5), 0, 4),
                                              ((2, 9, 3), -2, 2), ((2, 3, 10), 2, 16)])
def test_quantize_dequantize_blocked(np_type, onnx_type, shape, axis, block):
    """Blocked scales along axis; 7 in blocks of 3 and 5 in blocks of 4 leave a short last
    block, and a block larger than the dim is one block."""
    x = (RNG.standard_normal(shape) * 30).astype(np.float32)
    scale_shape = list(shape)
    scale_shape[axis] = -(-shape[axis] // block)
    scale = (RNG.random(scale_shape) * 0.3 + 0.02).astype(np.float32)
    zero = random_zero(np_type, scale_shape)
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=axis, block_size=block,
                         name="quant")
    d = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], axis=axis,
                         block_size=block, name="dequant")
    m = model([q, d], {"x": (np.float32, list(shape))}, {"q": onnx_type, "d": TensorProto.FLOAT},
              [("s", scale), ("z", zero)], 21)
    got = run_stax(m, {"x": x})
    want = run_reference(m, {"x": x})
    assert got["q"].dtype == np_type and np.array_equal(got["q"], want[0])
    assert np.array_equal(got["d"], want[1])
    # numpy, independently: each scale repeated over its block along the axis
    full_scale = np.take(np.repeat(scale, block, axis=axis), range(shape[axis]), axis=axis)
    full_zero = np.take(np.repeat(zero, block, axis=axis), range(shape[axis]), axis=axis)
    info = np.iinfo(np_type)
    expect = np.clip(np.rint(x / full_scale) + full_zero.astype(np.int64), info.min, info.max)
    assert np.array_equal(got["q"], expect.astype(np_type))


@pytest.mark.parametrize("np_type,onnx_type", INT_TYPES)
def test_quantize_rounds_half_to_even_and_saturates(np_type, onnx_type):
    info = np.iinfo(np_type)
    ties = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 4.5], np.float32)
    extremes = np.array([1e9, -1e9, np.inf, -np.inf, info.max + 10.0, info.min - 10.0, 0.0,
                         127.4], np.float32)
    x = np.concatenate([ties, extremes]).reshape(2, 8)
    zero = np.array(0, np_type) if info.min < 0 else np.array(3, np_type)
    m = quantize_node(21, x.shape, np.float32(1.0), zero, onnx_type)
    got = run_stax(m, {"x": x})["y"]
    want = run_reference(m, {"x": x})[0]
    finite = np.isfinite(x)
    assert np.array_equal(got[finite], want[finite])
    assert list(got[0, :3].astype(np.int64) - int(zero)) == [0, 2, 2]
    # Infinities saturate (the reference's int32 cast of rint(+inf) wraps to the minimum)
    assert got[1, 2] == info.max and got[1, 3] == info.min


def test_quantize_without_zero_point_is_uint8_and_output_dtype_picks_the_type():
    x = (RNG.standard_normal((5, 6)) * 100).astype(np.float32)
    m = quantize_node(13, x.shape, np.float32(0.5), None, TensorProto.UINT8)
    got = run_stax(m, {"x": x})["y"]
    assert got.dtype == np.uint8
    assert np.array_equal(got, run_reference(m, {"x": x})[0])
    assert np.array_equal(got, np.clip(np.rint(x / np.float32(0.5)), 0, 255).astype(np.uint8))
    m = quantize_node(21, x.shape, np.float32(0.01), None, TensorProto.INT16,
                      output_dtype=TensorProto.INT16)
    got = run_stax(m, {"x": x})["y"]
    assert got.dtype == np.int16
    assert np.array_equal(got, run_reference(m, {"x": x})[0])


def test_quantize_float16_and_int32_inputs_and_precision():
    x16 = (RNG.standard_normal((4, 6)) * 20).astype(np.float16)
    m = quantize_node(21, x16.shape, np.float16(0.37), np.int8(-5), TensorProto.INT8,
                      x_dtype=np.float16)
    assert np.array_equal(run_stax(m, {"x": x16})["y"], run_reference(m, {"x": x16})[0])
    xi = RNG.integers(-5000, 5000, (3, 7)).astype(np.int32)
    m = quantize_node(13, xi.shape, np.float32(40.0), np.uint8(100), TensorProto.UINT8,
                      x_dtype=np.int32)
    assert np.array_equal(run_stax(m, {"x": xi})["y"], run_reference(m, {"x": xi})[0])
    # opset 23: a float32 x with a float16 scale divides in float16 unless told otherwise
    x = (RNG.standard_normal((4, 6)) * 20).astype(np.float32)
    for precision in (None, TensorProto.FLOAT):
        attrs = {"precision": precision} if precision else {}
        m = quantize_node(23, x.shape, np.float16(0.37), np.int8(0), TensorProto.INT8, **attrs)
        assert np.array_equal(run_stax(m, {"x": x})["y"], run_reference(m, {"x": x})[0])


@pytest.mark.parametrize("np_type,onnx_type", INT_TYPES + [(np.int32, TensorProto.INT32)])
@pytest.mark.parametrize("scale_type", [np.float32, np.float16])
def test_dequantize_every_input_type(np_type, onnx_type, scale_type):
    info = np.iinfo(np_type)
    low, high = max(info.min, -70000), min(info.max, 70000)
    x = RNG.integers(low, high + 1, (3, 5)).astype(np_type)
    scale = (RNG.random(5) * 0.1 + 0.001).astype(scale_type)
    inputs = ["x", "s"]
    inits = [("s", scale)]
    if np_type != np.int32:
        inputs.append("z")
        inits.append(("z", random_zero(np_type, 5)))
    node = helper.make_node("DequantizeLinear", inputs, ["y"], axis=-1, name="dequant")
    m = model([node], {"x": (np_type, [3, 5])}, {"y": NP_TO_ONNX[np.dtype(scale_type)]}, inits)
    got = run_stax(m, {"x": x})["y"]
    want = run_reference(m, {"x": x})[0]
    assert got.dtype == scale_type
    np.testing.assert_array_equal(got, want)


def test_dequantize_output_dtype_opset_23():
    x = RNG.integers(-128, 128, (4, 4)).astype(np.int8)
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], name="dequant",
                            output_dtype=TensorProto.FLOAT16)
    m = model([node], {"x": (np.int8, [4, 4])}, {"y": TensorProto.FLOAT16},
              [("s", np.float32(0.013))], 23)
    got = run_stax(m, {"x": x})["y"]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, run_reference(m, {"x": x})[0])


def test_quantize_symbolic_and_strided_inputs():
    """Per-axis over a symbolic batch, fed a transposed (non-contiguous) array."""
    scale = np.array([0.1, 0.2, 0.3], np.float32)
    zero = np.array([1, 2, 3], np.uint8)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, name="quant")
    m = model([node], {"x": (np.float32, ["N", 3, "W"])}, {"y": TensorProto.UINT8},
              [("s", scale), ("z", zero)], 19)
    kernel = stax.load(m.SerializeToString())
    for n, w in [(2, 5), (1, 1), (4, 9)]:
        x = (RNG.standard_normal((w, 3, n)) * 5).astype(np.float32).transpose(2, 1, 0)
        want = np.clip(np.rint(x / scale[None, :, None]) + zero[None, :, None], 0, 255)
        assert np.array_equal(kernel(x=x)["y"], want.astype(np.uint8))


# ---- DynamicQuantizeLinear ------------------------------------------------------------------


@pytest.mark.parametrize("values", [
    lambda: RNG.standard_normal((3, 7)).astype(np.float32) * 4,
    lambda: np.abs(RNG.standard_normal((2, 5))).astype(np.float32) + 1,  # all positive
    lambda: -np.abs(RNG.standard_normal((9,))).astype(np.float32) - 2,   # all negative
    lambda: np.zeros((2, 3), np.float32),
    lambda: np.array([[-1.5, 0.0, 2.5, 1e-7]], np.float32),
])
def test_dynamic_quantize_linear(values):
    x = values()
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"], name="dyn")
    m = model([node], {"x": (np.float32, list(x.shape))},
              {"y": TensorProto.UINT8, "s": TensorProto.FLOAT, "z": TensorProto.UINT8}, (), 11)
    got = run_stax(m, {"x": x})
    want = run_reference(m, {"x": x})
    assert np.array_equal(got["y"], want[0])
    assert got["s"].shape == () and got["s"] == want[1]
    assert got["z"].shape == () and got["z"] == want[2]
    ort_y, ort_s, ort_z = run_ort(m, {"x": x})
    assert np.array_equal(got["y"], ort_y) and got["z"] == ort_z
    # For an all-zero x the ONNX reference's scale is 1 / 255 and ONNX Runtime's 1.0 (either
    # quantizes every element to 0); stax follows the reference.
    assert got["s"] == ort_s or (not np.any(x) and ort_s == 1.0)


# ---- MatMulInteger / QLinearMatMul ----------------------------------------------------------


def integers(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, size=shape).astype(dtype)


MATMUL_CASES = [
    # a shape, b shape, a zero point shape (None: absent), b zero point shape
    ((4, 3), (3, 5), (), ()),
    ((7, 33), (33, 17), (7,), (17,)),          # per row / per column
    ((2, 5, 9), (9, 6), (), (6,)),             # batch folded into M
    ((2, 5, 9), (2, 9, 6), (2, 5, 1), (2, 1, 6)),  # per batch and row / column
    ((3, 1, 4, 8), (2, 8, 5), None, None),     # broadcast batch dims
    ((8,), (8, 3), (), ()),                    # 1-D a
    ((4, 8), (8,), None, ()),                  # 1-D b
    ((65, 131), (131, 47), (65,), (47,)),      # several panels, odd K
    ((0, 4), (4, 3), (), ()),                  # empty
]


@pytest.mark.parametrize("a_shape,b_shape,za_shape,zb_shape", MATMUL_CASES)
@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.int8), (np.int8, np.int8),
                                           (np.uint8, np.uint8), (np.int8, np.uint8)])
def test_matmul_integer(a_shape, b_shape, za_shape, zb_shape, a_type, b_type):
    a, b = integers(a_type, a_shape), integers(b_type, b_shape)
    inputs, inits = ["a", "b"], [("b", b)]
    za = zb = None
    if za_shape is not None:
        za = integers(a_type, za_shape)
        inputs.append("za")
        inits.append(("za", za))
    if zb_shape is not None:
        zb = integers(b_type, zb_shape)
        if za is None:
            inputs.append("")
        inputs.append("zb")
        inits.append(("zb", zb))
    node = helper.make_node("MatMulInteger", inputs, ["y"], name="mmi")
    m = model([node], {"a": (a_type, list(a_shape))}, {"y": TensorProto.INT32}, inits, 10)
    got = run_stax(m, {"a": a}, dims_may_be_zero=True)["y"]
    av = a.astype(np.int64) - (0 if za is None else (za[:, None] if za.ndim == 1 else za))
    bv = b.astype(np.int64) - (0 if zb is None else zb)
    want = np.matmul(av, bv).astype(np.int32)
    assert got.dtype == np.int32 and np.array_equal(got, want)
    if za_shape in ((), None) and zb_shape in ((), None):
        assert np.array_equal(got, run_reference(m, {"a": a})[0])
    if len(a_shape) >= 2 and len(b_shape) == 2 and a_shape[0] and za_shape in ((), None) \
            and zb_shape in ((), (b_shape[1],), None) \
            and (ORT_U8S8_EXACT or (a_type, b_type) != (np.uint8, np.int8)):
        assert np.array_equal(got, run_ort(m, {"a": a})[0])


@pytest.mark.parametrize("level", ["sse2", "avx2", "avx512"])
def test_integer_gemm_isa_levels_agree(level):
    """Every ISA level (the generic, AVX2 / AVX-VNNI and AVX512-VNNI micro-kernels, as the CPU
    has them) gives the same int32 sums, the wrap-around of an overflowing sum included."""
    node = helper.make_node("MatMulInteger", ["a", "b"], ["y"], name="mmi")
    stax.set_isa_cap(level)
    try:
        a = np.full((5, 70000), 255, np.uint8)
        b = np.full((70000, 3), -128, np.int8)
        m = model([node], {"a": (np.uint8, [5, 70000])}, {"y": TensorProto.INT32},
                  [("b", b)], 10)
        got = run_stax(m, {"a": a})["y"]
        wrapped = ((255 * -128 * 70000 + 2**31) % 2**32) - 2**31
        assert np.all(got == wrapped)
        a, b = integers(np.uint8, (37, 61)), integers(np.int8, (61, 29))
        m = model([node], {"a": (np.uint8, [37, 61])}, {"y": TensorProto.INT32}, [("b", b)], 10)
        got = run_stax(m, {"a": a})["y"]
        assert np.array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    finally:
        stax.set_isa_cap(None)


def qlinear_matmul_reference(a, sa, za, b, sb, zb, sy, zy):
    """ONNX Runtime's arithmetic: float32 multiplier, float32 product, round half to even."""
    acc = np.matmul(a.astype(np.int64) - za, b.astype(np.int64) - zb).astype(np.int32)
    multiplier = (np.float32(sa) * np.float32(sb)) / np.float32(sy)
    value = np.rint(acc.astype(np.float32) * multiplier).astype(np.int64) + int(zy)
    info = np.iinfo(zy.dtype)
    return np.clip(value, info.min, info.max).astype(zy.dtype)


@pytest.mark.parametrize("opset", [10, 21])
@pytest.mark.parametrize("a_shape,b_shape", [((4, 6), (6, 3)), ((2, 5, 16), (16, 9)),
                                             ((3, 2, 7), (3, 7, 4))])
@pytest.mark.parametrize("a_type,y_type", [(np.uint8, np.uint8), (np.int8, np.int8),
                                           (np.uint8, np.int8)])
def test_qlinear_matmul(opset, a_shape, b_shape, a_type, y_type):
    a, b = integers(a_type, a_shape), integers(np.int8, b_shape)
    sa, za = np.float32(0.02), integers(a_type, ())
    sb, zb = np.float32(0.005), np.int8(0)
    sy, zy = np.float32(0.4), integers(y_type, ())
    names = ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"]
    inits = list(zip(names[1:], [sa, za, b, sb, zb, sy, zy]))
    node = helper.make_node("QLinearMatMul", names, ["y"], name="qmm")
    m = model([node], {"a": (a_type, list(a_shape))}, {"y": NP_TO_ONNX[np.dtype(y_type)]},
              inits, opset)
    got = run_stax(m, {"a": a})["y"]
    want = qlinear_matmul_reference(a, sa, za, b, sb, zb, sy, zy)
    assert got.dtype == y_type and np.array_equal(got, want)
    # the combinations ONNX Runtime implements, where its uint8 x int8 products are exact
    if a_type == y_type and (ORT_U8S8_EXACT or a_type != np.uint8):
        assert np.array_equal(got, run_ort(m, {"a": a})[0])
    # the ONNX reference multiplies in float64: at most one step apart at rounding ties
    ref = run_reference(m, {"a": a})[0]
    assert np.max(np.abs(got.astype(np.int64) - ref)) <= 1


def test_qlinear_matmul_per_row_and_per_column():
    a, b = integers(np.uint8, (5, 12)), integers(np.int8, (12, 7))
    sa, za = (RNG.random(5) * 0.05 + 0.01).astype(np.float32), integers(np.uint8, (5,))
    sb, zb = (RNG.random(7) * 0.01 + 0.001).astype(np.float32), integers(np.int8, (7,))
    sy, zy = np.float32(0.3), np.uint8(128)
    names = ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"]
    node = helper.make_node("QLinearMatMul", names, ["y"], name="qmm")
    m = model([node], {"a": (np.uint8, [5, 12])}, {"y": TensorProto.UINT8},
              list(zip(names[1:], [sa, za, b, sb, zb, sy, zy])), 21)
    got = run_stax(m, {"a": a})["y"]
    acc = (a.astype(np.int64) - za[:, None]) @ (b.astype(np.int64) - zb)
    multiplier = (sa[:, None] * sb[None, :]) / sy
    want = np.clip(np.rint(acc.astype(np.float32) * multiplier) + 128, 0, 255).astype(np.uint8)
    assert np.array_equal(got, want)


# ---- ConvInteger / QLinearConv --------------------------------------------------------------

CONV_CASES = [
    # x shape, w shape, attributes
    ((1, 3, 5, 5), (4, 3, 3, 3), {}),
    ((2, 4, 7, 6), (6, 2, 3, 3), {"pads": [1, 1, 1, 1], "group": 2, "strides": [2, 1]}),
    ((1, 2, 9, 9), (3, 2, 3, 3), {"dilations": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 12), (5, 3, 4), {"pads": [2, 1], "strides": [3]}),               # 1-D
    ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "pads": [1, 0, 1, 2]}),        # depthwise
    ((1, 2, 3, 4, 4), (2, 2, 2, 2, 2), {}),                                  # 3-D
]


def conv_reference(x, w, strides=None, pads=None, dilations=None, group=1, auto_pad="NOTSET"):
    """Integer convolution in numpy (int64, no overflow), written from the ONNX Conv formula:
    the ONNX reference mishandles per-channel zero points and scales of 1-D and 3-D convs."""
    spatial = x.ndim - 2
    strides = strides or [1] * spatial
    dilations = dilations or [1] * spatial
    kernel = w.shape[2:]
    extent = [d * (k - 1) + 1 for d, k in zip(dilations, kernel)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-n // s) for n, s in zip(x.shape[2:], strides)]
        total = [max(0, (o - 1) * s + e - n) for o, s, e, n in zip(out, strides, extent,
                                                                    x.shape[2:])]
        small = [t // 2 for t in total]
        begin = small if auto_pad == "SAME_UPPER" else [t - b for t, b in zip(total, small)]
        pads = begin + [t - b for t, b in zip(total, begin)]
    pads = pads or [0] * (2 * spatial)
    padded = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[spatial + i]) for i in range(spatial)])
    out = [(padded.shape[2 + i] - extent[i]) // strides[i] + 1 for i in range(spatial)]
    m, cg = w.shape[0], w.shape[1]
    mg = m // group
    y = np.zeros((x.shape[0], m) + tuple(out), np.int64)
    for g in range(group):
        xs = padded[:, g * cg:(g + 1) * cg]
        for tap in np.ndindex(*kernel):
            index = tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                          for t, d, o, s in zip(tap, dilations, out, strides))
            window = xs[(slice(None), slice(None)) + index]  # N, Cg, out...
            weights = w[g * mg:(g + 1) * mg, :, *tap]         # Mg, Cg
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", window, weights)
    return y


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_CASES)
@pytest.mark.parametrize("x_type,w_type", [(np.uint8, np.uint8), (np.uint8, np.int8),
                                           (np.int8, np.int8)])
def test_conv_integer(x_shape, w_shape, attrs, x_type, w_type):
    x, w = integers(x_type, x_shape), integers(w_type, w_shape)
    xz = integers(x_type, ())
    wz = integers(w_type, (w_shape[0],))
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], name="convi", **attrs)
    m = model([node], {"x": (x_type, list(x_shape))}, {"y": TensorProto.INT32},
              [("w", w), ("xz", xz), ("wz", wz)], 10)
    got = run_stax(m, {"x": x})["y"]
    shift = (slice(None),) + (None,) * (len(w_shape) - 1)
    want = conv_reference(x.astype(np.int64) - int(xz), w.astype(np.int64) - wz[shift], **attrs)
    assert got.dtype == np.int32 and np.array_equal(got, want)
    if len(x_shape) == 4:
        assert np.array_equal(got, run_reference(m, {"x": x})[0])
    if x_type == np.uint8 and len(x_shape) == 4 and "dilations" not in attrs:
        # ONNX Runtime's ConvInteger: uint8 x, a per-tensor zero point, no dilated SAME pads
        scalar = model([helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], **attrs)],
                       {"x": (x_type, list(x_shape))}, {"y": TensorProto.INT32},
                       [("w", w), ("xz", xz)], 10)
        assert np.array_equal(run_stax(scalar, {"x": x})["y"], run_ort(scalar, {"x": x})[0])


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_CASES[:5])
@pytest.mark.parametrize("x_type,w_type", [(np.uint8, np.int8), (np.int8, np.int8),
                                           (np.uint8, np.uint8)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_matches_onnxruntime(x_shape, w_shape, attrs, x_type, w_type, per_channel):
    x, w = integers(x_type, x_shape), integers(w_type, w_shape)
    m_out = w_shape[0]
    ws = ((RNG.random(m_out) * 0.01 + 0.001).astype(np.float32) if per_channel
          else np.float32(0.004))
    wz = np.zeros(m_out, w_type) if per_channel else np.array(0, w_type)
    if w_type == np.uint8:
        wz = np.full(wz.shape, 128, np.uint8)
    bias = RNG.integers(-2000, 2000, m_out).astype(np.int32)
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"]
    values = [np.float32(0.03), integers(x_type, ()), w, ws, wz, np.float32(0.25),
              integers(x_type, ()), bias]
    node = helper.make_node("QLinearConv", names, ["y"], name="qconv", **attrs)
    m = model([node], {"x": (x_type, list(x_shape))}, {"y": NP_TO_ONNX[np.dtype(x_type)]},
              list(zip(names[1:], values)), 10)
    got = run_stax(m, {"x": x})["y"]
    assert got.dtype == x_type
    # ONNX Runtime's arithmetic: int32 sums plus bias, float32 multiplier and product
    shift = (slice(None),) + (None,) * (len(w_shape) - 1)
    acc = conv_reference(x.astype(np.int64) - int(values[1]),
                         w.astype(np.int64) - wz.astype(np.int64)[shift] if wz.ndim
                         else w.astype(np.int64) - int(wz), **attrs)
    acc = acc + bias[(None, slice(None)) + (None,) * (len(x_shape) - 2)]
    multiplier = (np.float32(0.03) * np.asarray(ws, np.float32)) / np.float32(0.25)
    multiplier = multiplier[(None, slice(None)) + (None,) * (len(x_shape) - 2)] if np.ndim(ws) \
        else multiplier
    info = np.iinfo(x_type)
    want = np.clip(np.rint(acc.astype(np.float32) * multiplier) + int(values[6]), info.min,
                   info.max)
    assert np.array_equal(got, want.astype(x_type))
    # ONNX Runtime refuses dilated SAME pads; its uint8 x int8 sums saturate without VNNI
    if "dilations" not in attrs and (ORT_U8S8_EXACT or (x_type, w_type) != (np.uint8, np.int8)):
        assert np.array_equal(got, run_ort(m, {"x": x})[0])


# ---- errors ---------------------------------------------------------------------------------


def expect_error(m, feeds, *fragments, error=None):
    with pytest.raises(error or stax.Error) as info:
        run_stax(m, feeds)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_error_wrong_zero_point_dtype():
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq")
    m = model([node], {"x": (np.int8, [2, 3])}, {"y": TensorProto.FLOAT},
              [("s", np.float32(0.1)), ("z", np.uint8(3))])
    expect_error(m, {"x": np.zeros((2, 3), np.int8)}, "DequantizeLinear node 'dq'", "input 2 'z'",
                 "uint8", "int8")
    node = helper.make_node("MatMulInteger", ["a", "b", "za"], ["y"], name="mmi")
    m = model([node], {"a": (np.uint8, [2, 3])}, {"y": TensorProto.INT32},
              [("b", np.zeros((3, 2), np.int8)), ("za", np.int8(1))], 10)
    expect_error(m, {"a": np.zeros((2, 3), np.uint8)}, "MatMulInteger node 'mmi'", "'za'", "int8")
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q")
    m = model([node], {"x": (np.float32, [2])}, {"y": TensorProto.FLOAT},
              [("s", np.float32(0.1)), ("z", np.float32(3))])
    expect_error(m, {"x": np.zeros(2, np.float32)}, "QuantizeLinear node 'q'", "input 2 'z'",
                 "float32", "not supported")


def test_error_scale_shape_does_not_match_axis_dim():
    for opset, axis in [(13, 1), (21, -1)]:
        m = quantize_node(opset, (2, 3, 4), np.ones(5, np.float32), np.zeros(5, np.uint8),
                          TensorProto.UINT8, axis=axis)
        dim = 1 if axis == 1 else 2
        expect_error(m, {"x": np.zeros((2, 3, 4), np.float32)}, "QuantizeLinear node 'quant'",
                     "input 1 's' dim 0 is 5", "input 0 'x' dim %d" % dim)
    m = quantize_node(21, (2, 3), np.ones(3, np.float32), np.zeros(4, np.uint8),
                      TensorProto.UINT8)
    expect_error(m, {"x": np.zeros((2, 3), np.float32)}, "node 'quant'", "input 2 'z' dim 0 is 4",
                 "input 1 's' dim 0 is 3")
    m = quantize_node(21, (2, 3), np.ones((2, 3), np.float32), None, TensorProto.UINT8)
    expect_error(m, {"x": np.zeros((2, 3), np.float32)}, "node 'quant'", "input 1 's' has rank 2",
                 "block_size")
    m = quantize_node(21, (2, 3), np.ones(3, np.float32), None, TensorProto.UINT8, axis=2)
    expect_error(m, {"x": np.zeros((2, 3), np.float32)}, "node 'quant'", "axis")


def test_error_block_size_does_not_give_the_scale_dims():
    # 8 in blocks of 3 needs 3 scales, not 2; the other dims must be x's
    m = quantize_node(21, (4, 8), np.ones((4, 2), np.float32), None, TensorProto.UINT8, axis=1,
                      block_size=3)
    expect_error(m, {"x": np.zeros((4, 8), np.float32)}, "QuantizeLinear node 'quant'",
                 "input 1 's' dim 1 is 2", "input 0 'x' dim 1", "blocks of 3 needs 3")
    m = quantize_node(21, (4, 8), np.ones((3, 2), np.float32), None, TensorProto.UINT8, axis=1,
                      block_size=4)
    expect_error(m, {"x": np.zeros((4, 8), np.float32)}, "input 1 's' dim 0 is 3",
                 "input 0 'x' dim 0 is 4")
    m = quantize_node(21, (4, 8), np.ones((4, 2), np.float32), None, TensorProto.UINT8, axis=1,
                      block_size=-4)
    expect_error(m, {"x": np.zeros((4, 8), np.float32)}, "node 'quant'", "block_size", "-4")


def test_error_checked_at_run_time_when_dims_are_symbolic():
    """A scale fed at run time with a symbolic length: the kernel checks it per call."""
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], axis=0, name="dq")
    m = model([node], {"x": (np.int8, ["N", 2]), "s": (np.float32, ["K"])},
              {"y": TensorProto.FLOAT})
    kernel = stax.load(m.SerializeToString())
    x = np.ones((3, 2), np.int8)
    got = kernel(x=x, s=np.array([1, 2, 3], np.float32))["y"]
    assert np.array_equal(got, np.array([[1, 1], [2, 2], [3, 3]], np.float32))
    with pytest.raises(stax.Error) as info:
        kernel(x=x, s=np.array([1, 2], np.float32))
    assert "DequantizeLinear node 'dq'" in str(info.value)
    assert "input 1 (x_scale) dim 0 is 2 but input 0 (x) dim 0" in str(info.value)


@pytest.mark.parametrize("target", [TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2,
                                    TensorProto.INT4, TensorProto.UINT4])
def test_error_float8_and_int4_targets_are_not_supported(target):
    name = TensorProto.DataType.Name(target)
    m = quantize_node(21, (2, 3), np.float32(0.5), None, target, output_dtype=target)
    message = expect_error(m, {"x": np.zeros((2, 3), np.float32)}, "QuantizeLinear",
                           "'quant'", name, "not supported")
    assert "opset 21" in message
    # the type named by a zero-point initializer
    zero = helper.make_tensor("z", target, [], [0])
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="quant")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          [2, 3])],
                              [helper.make_tensor_value_info("y", target, None)],
                              [numpy_helper.from_array(np.float32(0.5), "s"), zero])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    expect_error(m, {"x": np.zeros((2, 3), np.float32)}, "QuantizeLinear", "'quant'",
                 "input 2 'z'", name, "not supported")


def test_error_qlinear_conv_per_channel_scale_length():
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    values = [np.float32(0.1), np.uint8(0), np.zeros((4, 2, 3, 3), np.int8),
              np.ones(3, np.float32), np.int8(0), np.float32(0.2), np.uint8(0)]
    node = helper.make_node("QLinearConv", names, ["y"], name="qc")
    m = model([node], {"x": (np.uint8, [1, 2, 5, 5])}, {"y": TensorProto.UINT8},
              list(zip(names[1:], values)), 10)
    expect_error(m, {"x": np.zeros((1, 2, 5, 5), np.uint8)}, "QLinearConv node 'qc'",
                 "input 4 'ws' dim 0 is 3", "input 3 'w' dim 0", "4")


def test_error_matmul_integer_zero_point_length():
    node = helper.make_node("MatMulInteger", ["a", "b", "za"], ["y"], name="mmi")
    m = model([node], {"a": (np.uint8, [4, 3])}, {"y": TensorProto.INT32},
              [("b", np.zeros((3, 2), np.uint8)), ("za", np.zeros(5, np.uint8))], 10)
    expect_error(m, {"a": np.zeros((4, 3), np.uint8)}, "MatMulInteger node 'mmi'",
                 "input 2 'za' dim 0 is 5", "input 0 'a' dim 0", "4")


# ---- the JIT leaves these ops interpreted ---------------------------------------------------


def test_results_unchanged_with_jit_sync_and_verify():
    """Quantized ops between float ops: the JIT compiles the float groups around the
    interpreted quantized ops, and verify mode (every compiled segment rechecked against the
    interpreter) agrees."""
    w = integers(np.int8, (16, 8))
    nodes = [
        helper.make_node("Mul", ["x", "two"], ["x2"]),
        helper.make_node("DynamicQuantizeLinear", ["x2"], ["q", "qs", "qz"]),
        helper.make_node("MatMulInteger", ["q", "w", "qz"], ["acc"]),
        helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["accf", "qs"], ["scaled"]),
        helper.make_node("Relu", ["scaled"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
        helper.make_node("Tanh", ["y"], ["out"]),
    ]
    m = model(nodes, {"x": (np.float32, ["B", 16])}, {"out": TensorProto.FLOAT},
              [("two", np.float32(2)), ("w", w), ("ys", np.float32(0.5)),
               ("yz", np.uint8(0))], 13)
    data = m.SerializeToString()
    off = stax.load(data, jit="off")
    sync = stax.load(data, options=stax.Options(jit="sync", jit_threshold=1, jit_verify=True))
    for batch in [3, 5, 3, 1, 5, 3]:
        x = RNG.standard_normal((batch, 16)).astype(np.float32)
        a, b = off(x=x)["out"], sync(x=x)["out"]
        np.testing.assert_array_equal(a, b)
        if ORT_U8S8_EXACT:  # uint8 x int8: ONNX Runtime's sums saturate without VNNI
            np.testing.assert_allclose(a, run_ort(m, {"x": x})[0], rtol=1e-6, atol=1e-6)
    assert sync.stats["compiles"] >= 1


# ---- models quantized by onnxruntime.quantization -------------------------------------------

quantization = pytest.importorskip("onnxruntime.quantization")


def mlp_model(batch="B"):
    """MatMul + Add + Relu, twice, then MatMul + Add."""
    sizes = [16, 32, 24, 10]
    nodes, inits, prev = [], [], "x"
    for i in range(3):
        w = (RNG.standard_normal((sizes[i], sizes[i + 1])) / np.sqrt(sizes[i])).astype(np.float32)
        b = (RNG.standard_normal(sizes[i + 1]) * 0.1).astype(np.float32)
        inits += [numpy_helper.from_array(w, "w%d" % i), numpy_helper.from_array(b, "b%d" % i)]
        nodes += [helper.make_node("MatMul", [prev, "w%d" % i], ["mm%d" % i]),
                  helper.make_node("Add", ["mm%d" % i, "b%d" % i], ["a%d" % i])]
        prev = "a%d" % i
        if i < 2:
            nodes.append(helper.make_node("Relu", [prev], ["r%d" % i]))
            prev = "r%d" % i
    graph = helper.make_graph(nodes, "mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, (16,)


def conv_model(batch="B"):
    """Conv + Relu, Conv + Relu, MaxPool, Conv: a small channels-first net."""
    w1 = (RNG.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    w2 = (RNG.standard_normal((8, 8, 3, 3)) * 0.15).astype(np.float32)
    w3 = (RNG.standard_normal((4, 8, 1, 1)) * 0.3).astype(np.float32)
    b1, b2, b3 = ((RNG.standard_normal(n) * 0.1).astype(np.float32) for n in (8, 8, 4))
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "w3", "b3"], ["y"]),
    ]
    inits = [numpy_helper.from_array(v, n) for n, v in
             [("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("w3", w3), ("b3", b3)]]
    graph = helper.make_graph(nodes, "convnet",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                             [batch, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, (3, 16, 16)


class Calibration(quantization.CalibrationDataReader):
    def __init__(self, shape, count=8):
        self.batches = iter([{"x": RNG.standard_normal((2,) + shape).astype(np.float32)}
                             for _ in range(count)])

    def get_next(self):
        return next(self.batches, None)


def output_scale(m):
    """The scale of the last DequantizeLinear (the quantum of a QDQ model's float output)."""
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    last = [n for n in m.graph.node if n.op_type == "DequantizeLinear"][-1]
    return float(np.max(inits[last.input[1]]))


def quantized(tmp_path, build, mode, **kwargs):
    float_model, shape = build()
    source, target = tmp_path / "float.onnx", tmp_path / ("%s.onnx" % mode)
    onnx.save(float_model, str(source))
    # Without VNNI ONNX Runtime multiplies uint8 by int8 with saturating 16-bit pair sums;
    # 7-bit weights (its quantizer's reduce_range, documented for such CPUs) keep them exact,
    # so the models are comparable on every machine.
    kwargs.setdefault("reduce_range", not ORT_U8S8_EXACT)
    if mode == "dynamic":
        quantization.quantize_dynamic(str(source), str(target), **kwargs)
    else:
        quantization.quantize_static(str(source), str(target), Calibration(shape), **kwargs)
    return onnx.load(str(target)), shape


def compare_with_onnxruntime(m, shape, quantum, batches=(1, 3, 2)):
    kernel = stax.load(m.SerializeToString())
    for batch in batches:
        x = RNG.standard_normal((batch,) + shape).astype(np.float32)
        got = kernel(x=x)
        name = m.graph.output[0].name
        # ORT with its graph optimizations off runs the QDQ graph as written, the same ops
        # stax runs. The float MatMul / Conv between a DequantizeLinear and the next
        # QuantizeLinear sums in another order, so a value within an ulp of a rounding tie
        # can quantize one step apart: allow one quantum of the output's scale (and a few
        # float32 ulps for the float tail after the last dequantization).
        want = run_ort(m, {"x": x}, optimize=False)[0]
        diff = np.abs(got[name].astype(np.float64) - want)
        assert np.all(diff <= quantum * 1.0001 + 1e-5 * np.abs(want)), np.max(diff)
        assert np.mean(diff > 1e-5 * (1 + np.abs(want))) < 0.05
        # ORT's optimized session fuses the QDQ pairs into QLinear kernels with their own
        # roundings: close, a few quanta at most.
        fused = run_ort(m, {"x": x})[0]
        assert np.max(np.abs(got[name] - fused)) <= 4 * quantum + 1e-4


@pytest.mark.parametrize("build", [mlp_model, conv_model])
@pytest.mark.parametrize("per_channel", [False, True])
def test_quantize_dynamic_models_match_onnxruntime(tmp_path, build, per_channel):
    m, shape = quantized(tmp_path, build, "dynamic", per_channel=per_channel,
                         weight_type=quantization.QuantType.QUInt8 if build is conv_model
                         else quantization.QuantType.QInt8)
    ops = {n.op_type for n in m.graph.node}
    assert "DynamicQuantizeLinear" in ops and ({"MatMulInteger", "ConvInteger"} & ops)
    kernel = stax.load(m.SerializeToString())
    for batch in (1, 4, 2):
        x = RNG.standard_normal((batch,) + shape).astype(np.float32)
        got = kernel(x=x)[m.graph.output[0].name]
        want = run_ort(m, {"x": x}, optimize=False)[0]
        # The integer parts (DynamicQuantizeLinear, MatMulInteger, ConvInteger) are exact;
        # only the float rescaling and bias after them differ, in float32 rounding.
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, run_ort(m, {"x": x})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("build", [mlp_model, conv_model])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("activation", ["QInt8", "QUInt8"])
def test_quantize_static_qdq_models_match_onnxruntime(tmp_path, build, per_channel, activation):
    m, shape = quantized(tmp_path, build, "static", per_channel=per_channel,
                         quant_format=quantization.QuantFormat.QDQ,
                         activation_type=getattr(quantization.QuantType, activation),
                         weight_type=quantization.QuantType.QInt8)
    ops = {n.op_type for n in m.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    compare_with_onnxruntime(m, shape, output_scale(m))


def test_quantize_static_qoperator_conv_matches_onnxruntime(tmp_path):
    """QOperator form: QLinearConv nodes (weights per channel) between Quantize/Dequantize."""
    m, shape = quantized(tmp_path, conv_model, "static", per_channel=True,
                         quant_format=quantization.QuantFormat.QOperator,
                         activation_type=quantization.QuantType.QUInt8,
                         weight_type=quantization.QuantType.QInt8, op_types_to_quantize=["Conv"])
    ops = {n.op_type for n in m.graph.node}
    assert "QLinearConv" in ops
    kernel = stax.load(m.SerializeToString())
    for batch in (1, 3):
        x = RNG.standard_normal((batch,) + shape).astype(np.float32)
        got = kernel(x=x)[m.graph.output[0].name]
        # Integer kernels with ONNX Runtime's requantization arithmetic: exact.
        np.testing.assert_array_equal(got, run_ort(m, {"x": x}, optimize=False)[0])


def test_quantize_static_qoperator_matmul_matches_onnxruntime(tmp_path):
    m, shape = quantized(tmp_path, mlp_model, "static",
                         quant_format=quantization.QuantFormat.QOperator,
                         activation_type=quantization.QuantType.QUInt8,
                         weight_type=quantization.QuantType.QInt8,
                         op_types_to_quantize=["MatMul"])
    assert "QLinearMatMul" in {n.op_type for n in m.graph.node}
    kernel = stax.load(m.SerializeToString())
    for batch in (2, 5):
        x = RNG.standard_normal((batch,) + shape).astype(np.float32)
        got = kernel(x=x)[m.graph.output[0].name]
        np.testing.assert_allclose(got, run_ort(m, {"x": x}, optimize=False)[0], rtol=1e-5,
                                   atol=1e-5)


# ---- whole models: ResNet-18 and a BERT encoder, QDQ by onnxruntime's quantize_static -------

def resnet18_model():
    """bench/models.py's ResNet-18 (torchvision's layout, random weights, dynamic N/H/W),
    calibrated and compared at 64x64 images."""
    return bench_models().resnet18(classes=10, seed=3), (3, 64, 64)


def bert_model():
    """bench/models.py's BERT encoder (2 layers, hidden 64), sequences of 16."""
    return bench_models().bert_encoder(layers=2, hidden=64, heads=4, ffn=128, seed=3), (16, 64)


def bench_models():
    import importlib
    import pathlib
    import sys
    bench = str(pathlib.Path(__file__).resolve().parents[2] / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    return importlib.import_module("models")


@pytest.mark.parametrize("build", [resnet18_model, bert_model])
def test_quantize_static_qdq_real_models_match_onnxruntime(tmp_path, build):
    """A QDQ ResNet-18 and BERT encoder (per-channel int8 weights, uint8 activations) against
    ORT running the same QDQ graph as written (optimizations off). The float convolutions
    and matmuls between a DequantizeLinear and the next QuantizeLinear sum in another order
    than ORT's, so an activation near a rounding tie quantizes one step apart; through 20
    quantized layers those steps add up (ResNet-18 measured: every output within 3 quanta,
    most 1-2 apart). The bound: at most 8 output quanta anywhere, 2 on average."""
    m, shape = quantized(tmp_path, build, "static", per_channel=True)
    quantum = output_scale(m)
    kernel = stax.load(m.SerializeToString(), options=stax.Options(jit="sync", jit_threshold=1))
    input_name = m.graph.input[0].name
    for batch in (1, 2):
        x = RNG.standard_normal((batch,) + shape).astype(np.float32)
        for _ in range(2):  # the second call runs compiled kernels
            got = next(iter(kernel.run(None, {input_name: x}).values()))
        want = run_ort(m, {input_name: x}, optimize=False)[0]
        diff = np.abs(got.astype(np.float64) - want)
        scale = np.max(np.abs(want)) + 1e-6
        assert quantum > 0
        assert np.max(diff) <= 8 * quantum + 1e-4 * scale, (np.max(diff), quantum)
        assert np.mean(diff) <= 2 * quantum, (np.mean(diff), quantum)
