"""ONNX sequence values through the Python API: models built with onnx.helper that construct,
insert, erase, read, split and concatenate sequences, take sequences as inputs (Python lists of
arrays) and return them (lists), carry them through Loop and return them from If; each checked
against onnx's ReferenceEvaluator and ONNX Runtime over random inputs and several shapes. Also
a JIT run (sync, threshold 1, verify) of a model mixing sequence ops with fusable elementwise
chains, the error paths (positions out of range, dtype mismatches, a tensor given for a
sequence and a sequence for a tensor), and a save/load round trip of a compiled program."""
import numpy as np
import pytest
from test_api_support import stax

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

try:
    import onnxruntime as ort
except ImportError:  # the ORT cross-check is skipped, the reference one still runs
    ort = None

RNG = np.random.default_rng(29)
FLOAT = TensorProto.FLOAT


def seq_info(name, elem_type=FLOAT, shape=None):
    return helper.make_value_info(
        name, helper.make_sequence_type_proto(helper.make_tensor_type_proto(elem_type, shape)))


def make_model(nodes, inputs, outputs, opset=17):
    graph = helper.make_graph(nodes, "sequences", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def same(got, want):
    """Outputs as stax returns them (arrays, lists of arrays) against a reference's."""
    if isinstance(want, list):
        assert isinstance(got, list), type(got)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def check(model, feeds, stax_model=None, reference=True):
    """stax against the ReferenceEvaluator and (when installed) ONNX Runtime. reference=False
    skips the ReferenceEvaluator: onnx 1.23's SequenceInsert computes the position as
    (position + len) % len, so inserting at the end (position == len) puts the tensor first
    and an empty sequence divides by zero; ONNX Runtime and the spec append."""
    stax_model = stax_model or stax.load(model.SerializeToString())
    got = stax_model(**feeds)
    names = [o.name for o in model.graph.output]
    if reference:
        for name, want in zip(names, ReferenceEvaluator(model).run(None, feeds)):
            same(got[name], want)
    if ort is not None:
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        for name, want in zip(names, session.run(None, feeds)):
            same(got[name], want)
    return got


def ops_model():
    """Construct(a, b) -> Insert(c, ins) -> At(at), Erase(del) -> Length, Concat(axis 0) and a
    stack (new_axis) of the inserted sequence's first two elements' sources."""
    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b"], ["s"], name="construct"),
        helper.make_node("SequenceInsert", ["s", "c", "ins"], ["s2"], name="insert"),
        helper.make_node("SequenceAt", ["s2", "at"], ["picked"], name="at"),
        helper.make_node("SequenceErase", ["s2", "del"], ["s3"], name="erase"),
        helper.make_node("SequenceLength", ["s3"], ["length"], name="length"),
        helper.make_node("ConcatFromSequence", ["s2"], ["joined"], name="concat", axis=0),
        helper.make_node("SequenceConstruct", ["a", "a"], ["aa"], name="construct_aa"),
        helper.make_node("ConcatFromSequence", ["aa"], ["stacked"], name="stack", axis=-1,
                         new_axis=1),
        helper.make_node("SequenceErase", ["s2"], ["s4"], name="erase_last"),
    ]
    inputs = [helper.make_tensor_value_info(n, FLOAT, [d, 3]) for n, d in
              (("a", "A"), ("b", "B"), ("c", "C"))]
    inputs += [helper.make_tensor_value_info(n, TensorProto.INT64, []) for n in ("ins", "at", "del")]
    outputs = [helper.make_tensor_value_info("picked", FLOAT, None),
               helper.make_tensor_value_info("length", TensorProto.INT64, []),
               helper.make_tensor_value_info("joined", FLOAT, None),
               helper.make_tensor_value_info("stacked", FLOAT, None),
               seq_info("s2"), seq_info("s4")]
    return make_model(nodes, inputs, outputs)


@pytest.mark.parametrize("ins,at,erase", [(2, 0, 0), (0, -1, -3), (-1, 1, 2), (1, -3, -1)])
def test_sequence_ops_against_references(ins, at, erase):
    model = ops_model()
    stax_model = stax.load(model.SerializeToString())
    for rows in ((2, 1, 3), (1, 4, 2), (3, 3, 1)):
        feeds = {n: RNG.standard_normal((r, 3)).astype(np.float32) for n, r in zip("abc", rows)}
        feeds.update({"ins": np.array(ins, np.int64), "at": np.array(at, np.int64),
                      "del": np.array(erase, np.int64)})
        got = check(model, feeds, stax_model, reference=ins != 2)
        # And against plain Python lists (ONNX positions: negative from the back).
        listed = [feeds["a"], feeds["b"]]
        listed.insert(ins if ins >= 0 else ins + 2, feeds["c"])
        same(got["s2"], listed)
        same(got["picked"], listed[at])
        same(got["s4"], listed[:-1])
        same(got["joined"], np.concatenate(listed, axis=0))
        same(got["stacked"], np.stack([feeds["a"], feeds["a"]], axis=-1))
        assert int(got["length"]) == 2


def test_sequence_position_out_of_range_names_node_input_position_and_length():
    model = stax.load(ops_model().SerializeToString())
    feeds = {n: np.ones((2, 3), np.float32) for n in "abc"}
    feeds.update({"ins": np.array(3, np.int64), "at": np.array(0, np.int64),
                  "del": np.array(0, np.int64)})
    with pytest.raises(stax.OutOfRangeError,
                       match=r"node 'insert': input 2 'position' is 3, outside \[-2, 2\] for a "
                             r"sequence of length 2"):
        model(**feeds)
    feeds.update({"ins": np.array(0, np.int64), "at": np.array(-4, np.int64)})
    with pytest.raises(stax.OutOfRangeError, match=r"node 'at': input 1 'position' is -4, "
                                                   r"outside \[-3, 2\]"):
        model(**feeds)


@pytest.mark.parametrize("axis,keepdims,split", [
    (0, 1, None), (0, 0, None), (1, 0, None), (-1, 1, None), (0, 1, 2), (1, 1, 2),
    (0, 1, [1, 0, 3]), (1, 0, [2, 2]),
])
def test_split_to_sequence_and_back(axis, keepdims, split):
    shape = (4, 4)
    nodes, inputs = [], [helper.make_tensor_value_info("x", FLOAT, ["N", "M"])]
    split_inputs = ["x"]
    if split is not None:
        nodes.append(helper.make_node("Constant", [], ["split"], value=helper.make_tensor(
            "split", TensorProto.INT64, [] if np.isscalar(split) else [len(split)],
            [split] if np.isscalar(split) else split)))
        split_inputs.append("split")
    nodes.append(helper.make_node("SplitToSequence", split_inputs, ["s"], axis=axis,
                                  keepdims=keepdims))
    nodes.append(helper.make_node("SequenceLength", ["s"], ["n"]))
    joined_axis = axis if keepdims or split is not None else axis
    nodes.append(helper.make_node("ConcatFromSequence", ["s"], ["back"], axis=joined_axis,
                                  new_axis=0 if keepdims or split is not None else 1))
    outputs = [seq_info("s"), helper.make_tensor_value_info("n", TensorProto.INT64, []),
               helper.make_tensor_value_info("back", FLOAT, None)]
    model = make_model(nodes, inputs, outputs)
    stax_model = stax.load(model.SerializeToString())
    sizes = [shape, (4, 5), (5, 4)] if split is None or np.isscalar(split) else [shape]
    for size in sizes:
        x = RNG.standard_normal(size).astype(np.float32)
        got = check(model, {"x": x}, stax_model)
        np.testing.assert_array_equal(got["back"], x)


def test_sequence_inputs_and_outputs_are_lists():
    nodes = [helper.make_node("SequenceInsert", ["seq", "t", "pos"], ["out"], name="insert"),
             helper.make_node("SequenceLength", ["seq"], ["n"])]
    inputs = [seq_info("seq", FLOAT, ["R", 3]), helper.make_tensor_value_info("t", FLOAT, [2, 3]),
              helper.make_tensor_value_info("pos", TensorProto.INT64, [])]
    outputs = [seq_info("out"), helper.make_tensor_value_info("n", TensorProto.INT64, [])]
    model = make_model(nodes, inputs, outputs)
    stax_model = stax.load(model.SerializeToString())
    seq, t, pos = stax_model.get_inputs()
    assert (seq.name, seq.dtype, seq.shape, seq.type) == ("seq", "float32", None,
                                                          "seq(tensor(float))")
    assert t.shape == (2, 3) and stax_model.get_outputs()[0].type == "seq(tensor(float))"
    assert "seq: seq(float32)" in repr(stax_model)
    for length in (0, 1, 4):
        seq = [RNG.standard_normal((int(RNG.integers(1, 4)), 3)).astype(np.float32)
               for _ in range(length)]
        for pos in range(-length, length + 1):
            t = RNG.standard_normal((2, 3)).astype(np.float32)
            got = check(model, {"seq": seq, "t": t, "pos": np.array(pos, np.int64)}, stax_model,
                        reference=pos != length)
            listed = list(seq)
            listed.insert(pos if pos >= 0 else pos + length, t)
            same(got["out"], listed)
            assert int(got["n"]) == length
    # Wrong kinds and dtypes name the input.
    t = np.ones((2, 3), np.float32)
    with pytest.raises(stax.InvalidArgumentError,
                       match="input 'seq' is a sequence of float32 tensors: pass a list of "
                             "arrays, got numpy.ndarray"):
        stax_model(seq=np.ones((2, 3), np.float32), t=t, pos=np.array(0, np.int64))
    with pytest.raises(stax.DtypeError, match="input 'seq' element 1: expected dtype float32"):
        stax_model(seq=[t, t.astype(np.int64)], t=t, pos=np.array(0, np.int64))
    with pytest.raises(stax.Error, match="input 't'"):
        stax_model(seq=[t], t=[t, t], pos=np.array(0, np.int64))


def test_sequence_dtype_mismatch_is_an_import_error():
    nodes = [helper.make_node("SequenceConstruct", ["a"], ["s"], name="construct"),
             helper.make_node("SequenceInsert", ["s", "b"], ["s2"], name="bad_insert")]
    inputs = [helper.make_tensor_value_info("a", FLOAT, [2]),
              helper.make_tensor_value_info("b", TensorProto.INT64, [2])]
    model = make_model(nodes, inputs, [seq_info("s2")])
    with pytest.raises(stax.DtypeError, match="SequenceInsert node 'bad_insert': input 1 'b' is "
                                              "int64, but sequence input 0 's' holds float32"):
        stax.load(model.SerializeToString())


def loop_if_model():
    """A Loop appending (x * i + y) to a sequence that starts empty, and an If returning the
    loop's sequence or a one-element one."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=FLOAT),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("Add", ["xi", "y"], ["v"]),
         helper.make_node("Relu", ["v"], ["r"]),
         helper.make_node("SequenceInsert", ["acc_in", "r"], ["acc_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         seq_info("acc_in", FLOAT, ["N"])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), seq_info("acc_out")])
    then_branch = helper.make_graph([helper.make_node("Identity", ["looped"], ["then_out"])],
                                    "then", [], [seq_info("then_out")])
    else_branch = helper.make_graph([helper.make_node("SequenceConstruct", ["x"], ["else_out"])],
                                    "else", [], [seq_info("else_out")])
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=FLOAT),
             helper.make_node("Constant", [], ["true"], value=helper.make_tensor(
                 "true", TensorProto.BOOL, [], [True])),
             helper.make_node("Loop", ["m", "true", "empty"], ["looped"], body=body),
             helper.make_node("If", ["flag"], ["chosen"], then_branch=then_branch,
                              else_branch=else_branch),
             helper.make_node("ConcatFromSequence", ["looped"], ["stacked"], axis=0, new_axis=1)]
    inputs = [helper.make_tensor_value_info("m", TensorProto.INT64, []),
              helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
              helper.make_tensor_value_info("x", FLOAT, ["N"]),
              helper.make_tensor_value_info("y", FLOAT, ["N"])]
    outputs = [seq_info("chosen"), seq_info("looped"),
               helper.make_tensor_value_info("stacked", FLOAT, None)]
    return make_model(nodes, inputs, outputs)


def test_sequences_through_loop_and_if():
    model = loop_if_model()
    stax_model = stax.load(model.SerializeToString())
    for n, trips in ((3, 1), (5, 4), (1, 2)):
        for flag in (True, False):
            feeds = {"m": np.array(trips, np.int64), "flag": np.array(flag),
                     "x": RNG.standard_normal(n).astype(np.float32),
                     "y": RNG.standard_normal(n).astype(np.float32)}
            check(model, feeds, stax_model)
    # Zero iterations: an empty sequence, which ConcatFromSequence refuses.
    feeds["m"] = np.array(0, np.int64)
    with pytest.raises(stax.InvalidArgumentError, match="empty sequence"):
        stax_model(**feeds)


def test_sequences_with_the_jit_verifying():
    """Fusable chains before, inside and after sequence ops: the JIT compiles the tensor
    segments (sequence ops are barriers) and verify mode checks them against the interpreter."""
    nodes = [helper.make_node("Add", ["x", "y"], ["xy"]),
             helper.make_node("Relu", ["xy"], ["r"]),
             helper.make_node("Mul", ["r", "y"], ["ry"]),
             helper.make_node("SplitToSequence", ["ry"], ["rows"], axis=0, keepdims=0),
             helper.make_node("SequenceAt", ["rows", "k"], ["row"]),
             helper.make_node("Sigmoid", ["row"], ["sr"]),
             helper.make_node("Mul", ["sr", "row"], ["swish"]),
             helper.make_node("SequenceInsert", ["rows", "swish"], ["more"]),
             helper.make_node("ConcatFromSequence", ["more"], ["joined"], axis=0, new_axis=1),
             helper.make_node("Tanh", ["joined"], ["t"]),
             helper.make_node("Add", ["t", "joined"], ["out"])]
    inputs = [helper.make_tensor_value_info("x", FLOAT, ["N", "M"]),
              helper.make_tensor_value_info("y", FLOAT, ["N", "M"]),
              helper.make_tensor_value_info("k", TensorProto.INT64, [])]
    outputs = [helper.make_tensor_value_info("out", FLOAT, None), seq_info("more")]
    model = make_model(nodes, inputs, outputs)
    options = stax.Options(jit="sync", jit_threshold=1, jit_verify=True)
    stax_model = stax.load(model.SerializeToString(), options=options)
    for n, m in ((3, 8), (3, 8), (5, 16), (2, 3), (5, 16)):
        feeds = {"x": RNG.standard_normal((n, m)).astype(np.float32),
                 "y": RNG.standard_normal((n, m)).astype(np.float32),
                 "k": np.array(int(RNG.integers(-n, n)), np.int64)}
        check(model, feeds, stax_model)
    assert stax_model._compiled_kernels() > 0


def test_saved_program_with_sequences_round_trips(tmp_path):
    model = loop_if_model()
    original = stax.load(model.SerializeToString())
    path = tmp_path / "sequences.stax"
    original.save(str(path))
    loaded = stax.load(str(path))
    assert "seq(float32)" in loaded.disassemble()
    feeds = {"m": np.array(3, np.int64), "flag": np.array(True),
             "x": RNG.standard_normal(4).astype(np.float32),
             "y": RNG.standard_normal(4).astype(np.float32)}
    want = original(**feeds)
    got = loaded(**feeds)
    for name in want:
        same(got[name], want[name])
    check(model, feeds, loaded)


def test_string_normalizer_is_unsupported_with_the_reason():
    node = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER")
    model = make_model([node], [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
                       [helper.make_tensor_value_info("y", TensorProto.STRING, None)])
    with pytest.raises(stax.UnimplementedError, match="StringNormalizer.*string tensors are not "
                                                      "supported"):
        stax.load(model.SerializeToString())


def sequence_map_model():
    """SequenceMap over a sequence and a second one zipped with it, plus a tensor: each step
    adds the tensor to the first element, multiplies by the second and gives its shape."""
    body = helper.make_graph(
        [helper.make_node("Add", ["e", "t"], ["sum"]),
         helper.make_node("Mul", ["sum", "f"], ["product"]),
         helper.make_node("Shape", ["e"], ["shape"])],
        "map_body",
        [helper.make_tensor_value_info("e", FLOAT, ["N"]),
         helper.make_tensor_value_info("f", FLOAT, ["N"]),
         helper.make_tensor_value_info("t", FLOAT, [1])],
        [helper.make_tensor_value_info("product", FLOAT, ["N"]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [1])])
    node = helper.make_node("SequenceMap", ["xs", "ys", "t"], ["products", "shapes"],
                            name="map", body=body)
    return make_model([node], [seq_info("xs", FLOAT, ["N"]), seq_info("ys", FLOAT, ["N"]),
                               helper.make_tensor_value_info("t", FLOAT, [1])],
                      [seq_info("products"), seq_info("shapes", TensorProto.INT64, [1])])


def test_sequence_map_runs_as_its_loop():
    model = sequence_map_model()
    stax_model = stax.load(model.SerializeToString())
    for length in (1, 3, 5):
        sizes = [int(RNG.integers(1, 6)) for _ in range(length)]
        feeds = {"xs": [RNG.standard_normal(n).astype(np.float32) for n in sizes],
                 "ys": [RNG.standard_normal(n).astype(np.float32) for n in sizes],
                 "t": RNG.standard_normal(1).astype(np.float32)}
        # onnx 1.23's ReferenceEvaluator fails on SequenceMap (a TypeError about its
        # attributes); ONNX Runtime and numpy are the references here.
        got = check(model, feeds, stax_model, reference=False)
        same(got["products"], [(x + feeds["t"]) * y for x, y in zip(feeds["xs"], feeds["ys"])])
        same(got["shapes"], [np.array([n], np.int64) for n in sizes])
    # A second sequence shorter than the first: SequenceAt names the position and the length.
    feeds["ys"] = feeds["ys"][:2]
    with pytest.raises(stax.OutOfRangeError, match="is 2, outside \\[-2, 1\\] for a sequence of "
                                                   "length 2"):
        stax_model(**feeds)
