"""ONNX models stax is demonstrated, tested and benchmarked on, built with onnx.helper from
fixed seeds. Every model has dynamic dims (dim_param), so one file serves every shape.

    transformer_layer(hidden, heads, ffn)  x[B, S, hidden] -> encoder layer (LayerNorm,
                                           attention with Shape/Reshape plumbing, GELU FFN)
    small_cnn()                            x[N, 3, H, W] -> Conv/Relu/MaxPool/Conv/GAP/Gemm
    resnet18()                             x[N, 3, H, W] -> torchvision's ResNet-18 layout as
                                           its exporter writes it (Conv -> BatchNormalization ->
                                           Relu, residual Adds, MaxPool, GAP, Gemm), random
                                           weights and batch statistics
    prune_mlp()                            x[N, D], scores[N] -> NonZero -> Gather -> MLP
    seed_mlp()                             the S1 program of BENCH.md: LayerNorm -> MLP with
                                           GELU -> residual -> where(mask, y, 0)
    bert_encoder(layers)                   S2/S6: BERT-base post-LN encoder layers (hidden 768,
    bert_layer()                           12 heads, FFN 3072, Erf GELU), x[B, S, 768]
    gpt2_block()                           a GPT-2 block as the TorchScript exporter writes it
                                           (opset 14): Shape chains, causal-mask Slices,
                                           Range, ConstantOfShape, tanh GELU
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _init(name, array):
    return numpy_helper.from_array(np.ascontiguousarray(array), name)


def _const_i64(name, values):
    return _init(name, np.array(values, dtype=np.int64))


def _model(graph, opset=OPSET):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="stax-bench")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _gelu_erf(nodes, x, out, prefix):
    """GELU as exporters write it: 0.5 * x * (1 + erf(x / sqrt(2)))."""
    nodes += [
        helper.make_node("Div", [x, prefix + "sqrt2"], [prefix + "xs"]),
        helper.make_node("Erf", [prefix + "xs"], [prefix + "erf"]),
        helper.make_node("Add", [prefix + "erf", prefix + "one"], [prefix + "erf1"]),
        helper.make_node("Mul", [x, prefix + "erf1"], [prefix + "xe"]),
        helper.make_node("Mul", [prefix + "xe", prefix + "half"], [out]),
    ]
    return [_init(prefix + "sqrt2", np.array(np.sqrt(2.0), dtype=np.float32)),
            _init(prefix + "one", np.array(1.0, dtype=np.float32)),
            _init(prefix + "half", np.array(0.5, dtype=np.float32))]


def transformer_layer(hidden=64, heads=4, ffn=256, seed=0):
    rng = np.random.default_rng(seed)
    head = hidden // heads
    w = lambda *shape: (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    b = lambda n: (0.1 * rng.standard_normal(n)).astype(np.float32)
    inits = [
        _init("ln1_g", 1 + b(hidden)), _init("ln1_b", b(hidden)),
        _init("wq", w(hidden, hidden)), _init("bq", b(hidden)),
        _init("wk", w(hidden, hidden)), _init("bk", b(hidden)),
        _init("wv", w(hidden, hidden)), _init("bv", b(hidden)),
        _init("wo", w(hidden, hidden)), _init("bo", b(hidden)),
        _init("ln2_g", 1 + b(hidden)), _init("ln2_b", b(hidden)),
        _init("w1", w(hidden, ffn)), _init("b1", b(ffn)),
        _init("w2", w(ffn, hidden)), _init("b2", b(hidden)),
        _const_i64("idx0", [0]), _const_i64("idx1", [1]),
        _const_i64("heads_dims", [heads, head]), _const_i64("hidden_dim", [hidden]),
        _init("scale", np.array(1.0 / np.sqrt(head), dtype=np.float32)),
    ]
    n = [
        helper.make_node("LayerNormalization", ["x", "ln1_g", "ln1_b"], ["ln1"], axis=-1,
                         epsilon=1e-5),
        # Shape plumbing as exporters emit it: [B, S] from Shape(x).
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Gather", ["x_shape", "idx0"], ["dim_b"], axis=0),
        helper.make_node("Gather", ["x_shape", "idx1"], ["dim_s"], axis=0),
        helper.make_node("Concat", ["dim_b", "dim_s", "heads_dims"], ["split_shape"], axis=0),
        helper.make_node("Concat", ["dim_b", "dim_s", "hidden_dim"], ["merge_shape"], axis=0),
    ]
    for name in ("q", "k", "v"):
        n += [
            helper.make_node("MatMul", ["ln1", "w" + name], [name + "_mm"]),
            helper.make_node("Add", [name + "_mm", "b" + name], [name + "_lin"]),
            helper.make_node("Reshape", [name + "_lin", "split_shape"], [name + "_4d"]),
            helper.make_node("Transpose", [name + "_4d"], [name + "_h"],
                             perm=[0, 2, 3, 1] if name == "k" else [0, 2, 1, 3]),
        ]
    n += [
        helper.make_node("MatMul", ["q_h", "k_h"], ["scores_raw"]),
        helper.make_node("Mul", ["scores_raw", "scale"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "v_h"], ["ctx_h"]),
        helper.make_node("Transpose", ["ctx_h"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "merge_shape"], ["ctx"]),
        helper.make_node("MatMul", ["ctx", "wo"], ["attn_mm"]),
        helper.make_node("Add", ["attn_mm", "bo"], ["attn"]),
        helper.make_node("Add", ["x", "attn"], ["res1"]),
        helper.make_node("LayerNormalization", ["res1", "ln2_g", "ln2_b"], ["ln2"], axis=-1,
                         epsilon=1e-5),
        helper.make_node("MatMul", ["ln2", "w1"], ["ff1_mm"]),
        helper.make_node("Add", ["ff1_mm", "b1"], ["ff1"]),
    ]
    inits += _gelu_erf(n, "ff1", "ff1_act", "gelu_")
    n += [
        helper.make_node("MatMul", ["ff1_act", "w2"], ["ff2_mm"]),
        helper.make_node("Add", ["ff2_mm", "b2"], ["ff2"]),
        helper.make_node("Add", ["res1", "ff2"], ["y"]),
    ]
    graph = helper.make_graph(
        n, "transformer_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", hidden])], inits)
    return _model(graph)


def small_cnn(seed=0):
    rng = np.random.default_rng(seed)
    inits = [
        _init("w1", (0.2 * rng.standard_normal((8, 3, 3, 3))).astype(np.float32)),
        _init("b1", (0.1 * rng.standard_normal(8)).astype(np.float32)),
        _init("w2", (0.2 * rng.standard_normal((16, 8, 3, 3))).astype(np.float32)),
        _init("b2", (0.1 * rng.standard_normal(16)).astype(np.float32)),
        _init("fc_w", (0.2 * rng.standard_normal((10, 16))).astype(np.float32)),
        _init("fc_b", (0.1 * rng.standard_normal(10)).astype(np.float32)),
    ]
    n = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], strides=[2, 2],
                         auto_pad="SAME_UPPER"),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        n, "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    return _model(graph)


def resnet18(classes=1000, seed=0):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []
    count = [0]

    def conv_bn(x, cin, cout, k, stride, relu):
        i = count[0]
        count[0] += 1
        p = "c%d_" % i
        fan = cin * k * k
        inits.extend([
            _init(p + "w", (rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / fan))
                  .astype(np.float32)),
            _init(p + "scale", (0.5 + 0.5 * rng.random(cout)).astype(np.float32)),
            _init(p + "bias", (0.1 * rng.standard_normal(cout)).astype(np.float32)),
            _init(p + "mean", (0.1 * rng.standard_normal(cout)).astype(np.float32)),
            _init(p + "var", (0.5 + rng.random(cout)).astype(np.float32)),
        ])
        nodes.append(helper.make_node("Conv", [x, p + "w"], [p + "conv"], kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[k // 2] * 4))
        nodes.append(helper.make_node("BatchNormalization",
                                      [p + "conv", p + "scale", p + "bias", p + "mean",
                                       p + "var"], [p + "bn"], epsilon=1e-5))
        if not relu:
            return p + "bn"
        nodes.append(helper.make_node("Relu", [p + "bn"], [p + "relu"]))
        return p + "relu"

    y = conv_bn("x", 3, 64, 7, 2, True)
    nodes.append(helper.make_node("MaxPool", [y], ["pool"], kernel_shape=[3, 3], strides=[2, 2],
                                  pads=[1, 1, 1, 1]))
    y, cin = "pool", 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            a = conv_bn(y, cin, cout, 3, stride, True)
            b = conv_bn(a, cout, cout, 3, 1, False)
            short = conv_bn(y, cin, cout, 1, stride, False) if stride != 1 or cin != cout else y
            out = "s%d_b%d" % (stage, block)
            nodes.append(helper.make_node("Add", [b, short], [out + "_sum"]))
            nodes.append(helper.make_node("Relu", [out + "_sum"], [out]))
            y, cin = out, cout
    inits.extend([
        _init("fc_w", (rng.standard_normal((classes, 512)) / np.sqrt(512)).astype(np.float32)),
        _init("fc_b", (0.01 * rng.standard_normal(classes)).astype(np.float32)),
    ])
    nodes += [
        helper.make_node("GlobalAveragePool", [y], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "resnet18",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])], inits)
    return _model(graph)


def prune_mlp(dim=32, hidden=64, seed=0):
    rng = np.random.default_rng(seed)
    inits = [
        _init("threshold", np.array(0.0, dtype=np.float32)),
        _init("w1", (rng.standard_normal((dim, hidden)) / np.sqrt(dim)).astype(np.float32)),
        _init("b1", (0.1 * rng.standard_normal(hidden)).astype(np.float32)),
        _init("w2", (rng.standard_normal((hidden, dim)) / np.sqrt(hidden)).astype(np.float32)),
    ]
    n = [
        helper.make_node("Greater", ["scores", "threshold"], ["keep"]),
        helper.make_node("NonZero", ["keep"], ["kept_2d"]),
        helper.make_node("Squeeze", ["kept_2d", "axis0"], ["kept"]),
        helper.make_node("Gather", ["x", "kept"], ["rows"], axis=0),
        helper.make_node("MatMul", ["rows", "w1"], ["h_mm"]),
        helper.make_node("Add", ["h_mm", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["h_act"]),
        helper.make_node("MatMul", ["h_act", "w2"], ["y"]),
        helper.make_node("TopK", ["scores", "k"], ["top_values", "top_indices"], axis=0),
    ]
    inits.append(_const_i64("axis0", [0]))
    graph = helper.make_graph(
        n, "prune_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", dim]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N"]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["K", dim]),
         helper.make_tensor_value_info("top_values", TensorProto.FLOAT, ["T"]),
         helper.make_tensor_value_info("top_indices", TensorProto.INT64, ["T"])], inits)
    return _model(graph)


def seed_mlp(dim=64, hidden=256, seed=0):
    """The S1 program: LayerNorm -> x.W1 + b1 -> GELU -> .W2 + b2 -> residual -> masked."""
    rng = np.random.default_rng(seed)
    inits = [
        _init("ln_g", (1 + 0.1 * rng.standard_normal(dim)).astype(np.float32)),
        _init("ln_b", (0.1 * rng.standard_normal(dim)).astype(np.float32)),
        _init("w1", (rng.standard_normal((dim, hidden)) / np.sqrt(dim)).astype(np.float32)),
        _init("b1", (0.1 * rng.standard_normal(hidden)).astype(np.float32)),
        _init("w2", (rng.standard_normal((hidden, dim)) / np.sqrt(hidden)).astype(np.float32)),
        _init("b2", (0.1 * rng.standard_normal(dim)).astype(np.float32)),
        _init("zero", np.array(0.0, dtype=np.float32)),
        _const_i64("axis_last", [2]),
    ]
    n = [
        helper.make_node("LayerNormalization", ["x", "ln_g", "ln_b"], ["ln"], axis=-1,
                         epsilon=1e-5),
        helper.make_node("MatMul", ["ln", "w1"], ["h_mm"]),
        helper.make_node("Add", ["h_mm", "b1"], ["h"]),
    ]
    inits += _gelu_erf(n, "h", "h_act", "gelu_")
    n += [
        helper.make_node("MatMul", ["h_act", "w2"], ["o_mm"]),
        helper.make_node("Add", ["o_mm", "b2"], ["o"]),
        helper.make_node("Add", ["x", "o"], ["res"]),
        helper.make_node("Unsqueeze", ["mask", "axis_last"], ["mask3"]),
        helper.make_node("Where", ["mask3", "res", "zero"], ["y"]),
    ]
    graph = helper.make_graph(
        n, "seed_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", dim]),
         helper.make_tensor_value_info("mask", TensorProto.BOOL, ["B", "S"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", dim])], inits)
    return _model(graph)


def seed_inputs(rng, batch, seq, dim=64):
    """x and a dynamic-padding mask from per-row valid lengths."""
    x = rng.standard_normal((batch, seq, dim)).astype(np.float32)
    lengths = rng.integers(1, seq + 1, size=batch)
    mask = np.arange(seq)[None, :] < lengths[:, None]
    return {"x": x, "mask": mask}


def _bert_layer_nodes(n, inits, rng, x, out, p, hidden, heads, ffn):
    """One post-LN BERT encoder layer (attention -> add -> LayerNorm -> GELU FFN -> add ->
    LayerNorm) from x to out; every name is prefixed with p. Reads the shared 'split_shape'
    and 'merge_shape' (Shape plumbing) made once by bert_encoder."""
    head = hidden // heads
    w = lambda *shape: (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    b = lambda k: (0.1 * rng.standard_normal(k)).astype(np.float32)
    for name in ("q", "k", "v"):
        inits += [_init(p + "w" + name, w(hidden, hidden)), _init(p + "b" + name, b(hidden))]
    inits += [_init(p + "wo", w(hidden, hidden)), _init(p + "bo", b(hidden)),
              _init(p + "ln1_g", 1 + b(hidden)), _init(p + "ln1_b", b(hidden)),
              _init(p + "w1", w(hidden, ffn)), _init(p + "b1", b(ffn)),
              _init(p + "w2", w(ffn, hidden)), _init(p + "b2", b(hidden)),
              _init(p + "ln2_g", 1 + b(hidden)), _init(p + "ln2_b", b(hidden)),
              _init(p + "scale", np.array(1.0 / np.sqrt(head), dtype=np.float32))]
    for name in ("q", "k", "v"):
        n += [
            helper.make_node("MatMul", [x, p + "w" + name], [p + name + "_mm"]),
            helper.make_node("Add", [p + name + "_mm", p + "b" + name], [p + name + "_lin"]),
            helper.make_node("Reshape", [p + name + "_lin", "split_shape"], [p + name + "_4d"]),
            helper.make_node("Transpose", [p + name + "_4d"], [p + name + "_h"],
                             perm=[0, 2, 3, 1] if name == "k" else [0, 2, 1, 3]),
        ]
    n += [
        helper.make_node("MatMul", [p + "q_h", p + "k_h"], [p + "scores_raw"]),
        helper.make_node("Mul", [p + "scores_raw", p + "scale"], [p + "scores"]),
        helper.make_node("Softmax", [p + "scores"], [p + "probs"], axis=-1),
        helper.make_node("MatMul", [p + "probs", p + "v_h"], [p + "ctx_h"]),
        helper.make_node("Transpose", [p + "ctx_h"], [p + "ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", [p + "ctx_t", "merge_shape"], [p + "ctx"]),
        helper.make_node("MatMul", [p + "ctx", p + "wo"], [p + "attn_mm"]),
        helper.make_node("Add", [p + "attn_mm", p + "bo"], [p + "attn"]),
        helper.make_node("Add", [x, p + "attn"], [p + "res1"]),
        helper.make_node("LayerNormalization", [p + "res1", p + "ln1_g", p + "ln1_b"],
                         [p + "h1"], axis=-1, epsilon=1e-12),
        helper.make_node("MatMul", [p + "h1", p + "w1"], [p + "ff1_mm"]),
        helper.make_node("Add", [p + "ff1_mm", p + "b1"], [p + "ff1"]),
    ]
    inits += _gelu_erf(n, p + "ff1", p + "ff1_act", p + "gelu_")
    n += [
        helper.make_node("MatMul", [p + "ff1_act", p + "w2"], [p + "ff2_mm"]),
        helper.make_node("Add", [p + "ff2_mm", p + "b2"], [p + "ff2"]),
        helper.make_node("Add", [p + "h1", p + "ff2"], [p + "res2"]),
        helper.make_node("LayerNormalization", [p + "res2", p + "ln2_g", p + "ln2_b"], [out],
                         axis=-1, epsilon=1e-12),
    ]


def bert_encoder(layers=1, hidden=768, heads=12, ffn=3072, seed=0):
    """BENCH.md S2: a BERT-base-like encoder: `layers` post-LN layers (hidden 768, 12 heads,
    FFN 3072, GELU as Erf, LayerNorm eps 1e-12), x[B, S, hidden] -> y[B, S, hidden], B and S
    dynamic. No attention mask (every row is full length). layers=1 is the S2/S6 layer;
    layers=4 the stack."""
    rng = np.random.default_rng(seed)
    inits = [_const_i64("idx0", [0]), _const_i64("idx1", [1]),
             _const_i64("heads_dims", [heads, hidden // heads]),
             _const_i64("hidden_dim", [hidden])]
    n = [
        helper.make_node("Shape", ["x"], ["x_shape"]),
        helper.make_node("Gather", ["x_shape", "idx0"], ["dim_b"], axis=0),
        helper.make_node("Gather", ["x_shape", "idx1"], ["dim_s"], axis=0),
        helper.make_node("Concat", ["dim_b", "dim_s", "heads_dims"], ["split_shape"], axis=0),
        helper.make_node("Concat", ["dim_b", "dim_s", "hidden_dim"], ["merge_shape"], axis=0),
    ]
    current = "x"
    for layer in range(layers):
        out = "y" if layer == layers - 1 else f"l{layer}_out"
        _bert_layer_nodes(n, inits, rng, current, out, f"l{layer}_", hidden, heads, ffn)
        current = out
    graph = helper.make_graph(
        n, "bert_encoder" if layers > 1 else "bert_layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", hidden])], inits)
    return _model(graph)


def bert_layer(seed=0):
    """One BERT-base encoder layer (bert_encoder(layers=1))."""
    return bert_encoder(layers=1, seed=seed)


def gpt2_block(hidden=768, heads=12, positions=1024, embed=True, seed=0):
    """A GPT-2 block (HF GPT2Block: pre-LN attention with the causal mask sliced from a
    [1, 1, positions, positions] buffer, tanh GELU MLP, Conv1D layers) written node for node
    the way the TorchScript exporter at opset 14 writes it: LayerNorm as ReduceMean/Sub/Pow
    chains, every Conv1D as `x.view(-1, x.size(-1))` -> Gemm -> `.view(x.size()[:-1] + (nf,))`,
    heads split with `x.size(-1) // heads`, merged with `x.size(-2) * x.size(-1)`, and the mask
    as `bias[:, :, ns - nd:ns, :ns]` -> Cast(bool) -> Where. Every one of those sizes is a
    Shape -> Gather/Slice -> Unsqueeze -> Concat chain. embed=True puts GPT2Model's front in
    front of it: position ids `arange(S)` (Range), their embedding (Gather) and an all-ones
    attention mask built with ConstantOfShape, turned into `(1 - mask) * -10000` and added to
    the scores. x[B, S, hidden] -> y[B, S, hidden]; S must not exceed `positions`."""
    rng = np.random.default_rng(seed)
    head = hidden // heads
    w = lambda *shape: (0.02 * rng.standard_normal(shape)).astype(np.float32)
    b = lambda k: (0.02 * rng.standard_normal(k)).astype(np.float32)
    n, inits = [], []
    names = [0]

    def fresh(tag):
        names[0] += 1
        return "%s_%d" % (tag, names[0])

    def const(value, dtype=np.int64):
        name = fresh("const")  # not _init: ascontiguousarray makes scalars [1]
        inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    def node(op, inputs, **attrs):
        out = fresh(op.lower())
        n.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def size(x, axis):
        """x.size(axis): a scalar int64."""
        return node("Gather", [node("Shape", [x]), const(axis)], axis=0)

    def unsq(x):
        return node("Unsqueeze", [x, const([0])])

    def size_prefix(x, drop):
        """x.size()[:-drop]."""
        return node("Slice", [node("Shape", [x]), const([0]), const([-drop]), const([0])])

    def layer_norm(x, p):
        inits.extend([_init(p + "_g", 1 + b(hidden)), _init(p + "_b", b(hidden))])
        mean = node("ReduceMean", [x], axes=[-1])
        d = node("Sub", [x, mean])
        var = node("ReduceMean", [node("Pow", [d, const(2.0, np.float32)])], axes=[-1])
        sd = node("Sqrt", [node("Add", [var, const(1e-5, np.float32)])])
        return node("Add", [node("Mul", [node("Div", [d, sd]), p + "_g"]), p + "_b"])

    def conv1d(x, nin, nf, p):
        inits.extend([_init(p + "_w", w(nin, nf)), _init(p + "_bias", b(nf))])
        size_out = node("Concat", [size_prefix(x, 1), const([nf])], axis=0)
        flat = node("Reshape", [x, node("Concat", [const([-1]), unsq(size(x, -1))], axis=0)])
        mm = node("Gemm", [flat, p + "_w", p + "_bias"])
        return node("Reshape", [mm, size_out])

    def split_heads(x, perm):
        per_head = node("Div", [size(x, -1), const(heads)])
        shape = node("Concat", [size_prefix(x, 1), const([heads]), unsq(per_head)], axis=0)
        return node("Transpose", [node("Reshape", [x, shape])], perm=perm)

    x = "x"
    add_mask = None
    if embed:
        inits.append(_init("wpe", w(positions, hidden)))
        seq = size(x, 1)
        pos = node("Range", [const(0), seq, const(1)])
        pos = node("Unsqueeze", [pos, const([0])])
        x = node("Add", [x, node("Gather", ["wpe", pos], axis=0)])
        ones = node("ConstantOfShape",
                    [node("Concat", [unsq(size("x", 0)), unsq(size("x", 1))], axis=0)],
                    value=numpy_helper.from_array(np.array([1], dtype=np.int64)))
        mask = node("Cast", [node("Unsqueeze", [ones, const([1, 2])])], to=TensorProto.FLOAT)
        add_mask = node("Mul", [node("Sub", [const(1.0, np.float32), mask]),
                                const(-10000.0, np.float32)])
    inits.append(_init("bias", np.tril(np.ones((positions, positions), dtype=np.uint8))
                       .reshape(1, 1, positions, positions)))
    h = layer_norm(x, "ln_1")
    qkv = conv1d(h, hidden, 3 * hidden, "c_attn")
    q, k, v = (fresh(t) for t in "qkv")
    n.append(helper.make_node("Split", [qkv, const([hidden] * 3)], [q, k, v], axis=2))
    q = split_heads(q, [0, 2, 1, 3])
    k = split_heads(k, [0, 2, 3, 1])
    v = split_heads(v, [0, 2, 1, 3])
    att = node("Div", [node("MatMul", [q, k]), const(float(np.sqrt(head)), np.float32)])
    nd, ns = size(att, -2), size(att, -1)
    mask = node("Slice", ["bias", unsq(node("Sub", [ns, nd])), unsq(ns), const([2]),
                          const([1])])
    mask = node("Slice", [mask, const([0]), unsq(ns), const([3]), const([1])])
    att = node("Where", [node("Cast", [mask], to=TensorProto.BOOL), att,
                         const(-10000.0, np.float32)])
    if add_mask:
        att = node("Add", [att, add_mask])
    ctx = node("Transpose", [node("MatMul", [node("Softmax", [att], axis=-1), v])],
               perm=[0, 2, 1, 3])
    merged = node("Mul", [size(ctx, -2), size(ctx, -1)])
    ctx = node("Reshape", [ctx, node("Concat", [size_prefix(ctx, 2), unsq(merged)], axis=0)])
    x = node("Add", [x, conv1d(ctx, hidden, hidden, "attn_proj")])
    h = conv1d(layer_norm(x, "ln_2"), hidden, 4 * hidden, "mlp_fc")
    cube = node("Pow", [h, const(3.0, np.float32)])
    inner = node("Mul", [node("Add", [h, node("Mul", [cube, const(0.044715, np.float32)])]),
                         const(float(np.sqrt(2.0 / np.pi)), np.float32)])
    gelu = node("Mul", [node("Mul", [h, const(0.5, np.float32)]),
                        node("Add", [node("Tanh", [inner]), const(1.0, np.float32)])])
    x = node("Add", [x, conv1d(gelu, 4 * hidden, hidden, "mlp_proj")])
    n.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(
        n, "gpt2_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", hidden])], inits)
    return _model(graph, opset=14)


def to_half(model, elem_type=TensorProto.FLOAT16):
    """The model with every float32 initializer, Constant, graph input/output and Cast target
    turned into float16 (or bfloat16 with elem_type=TensorProto.BFLOAT16): the same network
    stored in 16 bits, as a converter would give it. value_info is dropped (stax re-infers)."""
    import ml_dtypes
    np_type = np.float16 if elem_type == TensorProto.FLOAT16 else ml_dtypes.bfloat16
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph

    def convert(t):
        out = numpy_helper.from_array(numpy_helper.to_array(t).astype(np_type), t.name)
        if elem_type == TensorProto.BFLOAT16:  # numpy_helper stores ml_dtypes arrays as raw bits
            out.data_type = TensorProto.BFLOAT16
        return out

    for i, t in enumerate(list(g.initializer)):
        if t.data_type == TensorProto.FLOAT:
            g.initializer[i].CopyFrom(convert(t))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = elem_type
    del g.value_info[:]
    for node in g.node:
        for a in node.attribute:
            if node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = elem_type
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(convert(a.t))
    return m
