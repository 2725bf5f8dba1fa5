"""NonMaxSuppression and RoiAlign (torchvision detection exports) through ONNX import and the
Python builders, against ONNX Runtime and onnx's ReferenceEvaluator: many random cases and the
edge cases (no boxes, everything suppressed, ties in scores, degenerate and flipped boxes,
batch and classes > 1, rois outside the image, adaptive sampling), the errors (each names the
node, the input and the dim; nothing aborts), a detection post-processing graph that must
match ONNX Runtime exactly, and the JIT tier (sync + verify) leaving both ops interpreted.

Order of NonMaxSuppression's output: rows by batch, then class, then selection order within
the class: descending score, and among equal scores the lower box index first (ONNX Runtime's
priority queue orders (score, index) that way; onnx's reference evaluator does the same).

Known differences between the references, and what stax does:
  - RoiAlign at opset 10: the reference evaluator applies opset 16's default
    (half_pixel); ONNX Runtime applies opset 10's meaning (no half-pixel shift), as stax
    does. Opset-10 models are checked against ORT and against the reference with an explicit
    output_half_pixel.
  - NonMaxSuppression without max_output_boxes_per_class, iou_threshold or score_threshold,
    or with a negative max_output_boxes_per_class: the reference evaluator fails (it calls
    .size on None or on an int); those cases are checked against ONNX Runtime only.
  - RoiAlign, half_pixel, a roi with x2 < x1 or y2 < y1 and sampling_ratio 0: ONNX Runtime
    fails ("Integer overflow"); the reference gives 0 for those bins, as stax does.
"""
import numpy as np
import pytest

from test_api_support import stax

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

RNG = np.random.default_rng(1013)


def run_ort(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def run_reference(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


def run_stax(model, feeds, **options):
    kernel = stax.load(model.SerializeToString(), dims_may_be_zero=True,
                       options=stax.Options(**options) if options else None)
    out = kernel(**feeds)
    return [np.asarray(out[name]) for name in kernel.output_names]


# ---- NonMaxSuppression ---------------------------------------------------------------------

NMS_OPTIONAL = ("max_output_boxes_per_class", "iou_threshold", "score_threshold")
MAX_AND_IOU = NMS_OPTIONAL[:2]


def nms_model(present=NMS_OPTIONAL, opset=11, initializers=None, boxes_shape=("B", "S", 4),
              scores_shape=("B", "C", "S"), **attrs):
    """A one-node model; `present` names the optional inputs given (fed at run time unless
    `initializers` holds their value)."""
    initializers = initializers or {}
    names = ["boxes", "scores"] + [name if name in present else "" for name in NMS_OPTIONAL]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("NonMaxSuppression", names, ["selected"], name="nms", **attrs)
    inputs = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, list(boxes_shape)),
              helper.make_tensor_value_info("scores", TensorProto.FLOAT, list(scores_shape))]
    types = {"max_output_boxes_per_class": TensorProto.INT64}
    for name in present:
        if name not in initializers:
            inputs.append(helper.make_tensor_value_info(name, types.get(name, TensorProto.FLOAT),
                                                        [1]))
    graph = helper.make_graph(
        [node], "nms", inputs, [helper.make_tensor_value_info("selected", TensorProto.INT64, None)],
        [numpy_helper.from_array(value, name) for name, value in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def nms_feeds(boxes, scores, max_out=None, iou=None, score=None):
    feeds = {"boxes": boxes.astype(np.float32), "scores": scores.astype(np.float32)}
    for name, value, dtype in (("max_output_boxes_per_class", max_out, np.int64),
                               ("iou_threshold", iou, np.float32),
                               ("score_threshold", score, np.float32)):
        if value is not None:
            feeds[name] = np.array([value], dtype)
    return feeds


def random_boxes(batches, spatial, center_point_box, flip=0.0):
    """Boxes in a 10 x 10 field, so that many overlap; `flip` of them with swapped corners."""
    if center_point_box:
        centers = RNG.uniform(0, 10, (batches, spatial, 2))
        sizes = RNG.uniform(0.5, 5, (batches, spatial, 2))
        return np.concatenate([centers, sizes], axis=2).astype(np.float32)
    low = RNG.uniform(0, 8, (batches, spatial, 2))
    high = low + RNG.uniform(0.5, 5, (batches, spatial, 2))
    boxes = np.concatenate([low, high], axis=2)
    swap = RNG.random((batches, spatial)) < flip
    boxes[swap] = boxes[swap][:, [2, 3, 0, 1]]
    return boxes.astype(np.float32)


def check_nms(model, feeds, reference=True):
    """stax == ONNX Runtime == the reference evaluator, exactly (reference=False: ORT only,
    where the reference evaluator fails: see the top)."""
    want = run_ort(model, feeds)[0]
    got = run_stax(model, feeds)[0]
    assert got.dtype == np.int64
    if reference:
        assert np.array_equal(want, run_reference(model, feeds)[0].reshape(-1, 3)), \
            "the references disagree"
    assert got.shape == want.shape, (got, want)
    assert np.array_equal(got, want), (got, want)
    return got


NMS_RANDOM = [
    # batches, classes, spatial, center_point_box, max_out, iou, score_threshold, integer scores
    (1, 1, 6, 0, 3, 0.5, None, False),
    (1, 1, 40, 0, 10, 0.3, 0.2, False),
    (2, 3, 25, 0, 5, 0.4, 0.5, True),
    (3, 2, 30, 1, 100, 0.2, None, True),
    (1, 4, 50, 1, 7, 0.6, 0.1, False),
    (2, 1, 1, 0, 5, 0.5, None, False),
    (2, 2, 64, 0, 64, 0.0, None, False),
    (1, 2, 64, 0, 64, 1.0, None, True),
    (4, 3, 12, 1, 1, 0.5, 0.9, False),
    (1, 1, 200, 0, 20, 0.45, 0.05, False),
]


@pytest.mark.parametrize("batches,classes,spatial,center,max_out,iou,score,integer",
                         NMS_RANDOM)
def test_nms_random_against_onnxruntime_and_reference(batches, classes, spatial, center,
                                                      max_out, iou, score, integer):
    for trial in range(3):
        boxes = random_boxes(batches, spatial, center, flip=0.3 if not center else 0)
        if integer:  # many ties
            scores = RNG.integers(0, 4, (batches, classes, spatial)) / 4.0
        else:
            scores = RNG.random((batches, classes, spatial))
        present = [n for n, v in zip(NMS_OPTIONAL, (max_out, iou, score)) if v is not None]
        model = nms_model(present, center_point_box=center)
        check_nms(model, nms_feeds(boxes, scores, max_out, iou, score))


def test_nms_ties_lower_box_index_first():
    """Equal scores: ONNX Runtime's order takes the lower box index first, so among two equal
    boxes with equal scores the first one is kept."""
    boxes = np.array([[[0, 0, 1, 1], [5, 5, 6, 6], [0, 0, 1, 1], [2, 2, 3, 3]]], np.float32)
    scores = np.array([[[0.5, 0.5, 0.5, 0.5]]], np.float32)
    got = check_nms(nms_model(), nms_feeds(boxes, scores, 10, 0.5, 0.0))
    assert got.tolist() == [[0, 0, 0], [0, 0, 1], [0, 0, 3]]


def test_nms_identical_boxes_all_but_one_suppressed():
    boxes = np.tile(np.array([0, 0, 2, 2], np.float32), (2, 9, 1))
    scores = RNG.random((2, 3, 9)).astype(np.float32)
    got = check_nms(nms_model(), nms_feeds(boxes, scores, 9, 0.5, 0.0))
    assert got.shape == (6, 3)
    assert got[:, 2].tolist() == [int(np.argmax(scores[b, c])) for b in range(2)
                                  for c in range(3)]


def test_nms_no_boxes_and_empty_batches():
    for batches, classes, spatial in [(1, 1, 0), (0, 3, 5), (2, 0, 4), (3, 2, 0)]:
        boxes = np.zeros((batches, spatial, 4), np.float32)
        scores = np.zeros((batches, classes, spatial), np.float32)
        got = check_nms(nms_model(), nms_feeds(boxes, scores, 5, 0.5, 0.0))
        assert got.shape == (0, 3)


def test_nms_everything_below_the_score_threshold():
    boxes = random_boxes(2, 10, 0)
    scores = RNG.random((2, 2, 10)) * 0.5
    got = check_nms(nms_model(), nms_feeds(boxes, scores, 10, 0.5, 0.5))
    assert got.shape == (0, 3)
    # the threshold is strict: a score equal to it is not selected
    scores[0, 0, 3] = 0.5
    got = check_nms(nms_model(), nms_feeds(boxes, scores, 10, 0.5, 0.5))
    assert got.shape == (0, 3)


def test_nms_degenerate_boxes_never_suppress():
    """Zero-area boxes (a point, a line) and touching boxes do not overlap by ORT's rule."""
    boxes = np.array([[[1, 1, 1, 1], [1, 1, 1, 1], [0, 0, 0, 4], [0, 0, 2, 2], [2, 0, 4, 2],
                       [0, 0, 2, 2]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7, 0.6, 0.5, 0.4]]], np.float32)
    got = check_nms(nms_model(MAX_AND_IOU), nms_feeds(boxes, scores, 10, 0.0, None))
    assert got[:, 2].tolist() == [0, 1, 2, 3, 4]  # the last duplicates box 3


def test_nms_flipped_corners_are_the_same_box():
    boxes = np.array([[[0, 0, 4, 4], [4, 4, 0, 0], [0, 4, 4, 0], [10, 10, 12, 12]]], np.float32)
    scores = np.array([[[0.1, 0.9, 0.5, 0.3]]], np.float32)
    got = check_nms(nms_model(MAX_AND_IOU), nms_feeds(boxes, scores, 10, 0.5, None))
    assert got[:, 2].tolist() == [1, 3]


def test_nms_center_point_boxes():
    boxes = np.array([[[2, 2, 4, 4], [2.2, 2.1, 4, 4], [8, 8, 2, 2], [2, 2, -4, -4]]],
                     np.float32)
    scores = np.array([[[0.5, 0.6, 0.4, 0.3]]], np.float32)
    check_nms(nms_model(MAX_AND_IOU, center_point_box=1), nms_feeds(boxes, scores, 10, 0.5))


@pytest.mark.parametrize("max_out", [0, -3, 1, 2])
def test_nms_max_output_limits(max_out):
    boxes = random_boxes(2, 20, 0)
    scores = RNG.random((2, 3, 20))
    got = check_nms(nms_model(MAX_AND_IOU), nms_feeds(boxes, scores, max_out, 0.7),
                    reference=max_out >= 0)
    assert got.shape[0] <= 6 * max(max_out, 0)
    for b, c in np.ndindex(2, 3):
        rows = got[(got[:, 0] == b) & (got[:, 1] == c)]
        assert len(rows) == min(max(max_out, 0), 20) or max_out > 1


def test_nms_optional_inputs_absent():
    """Without max_output_boxes_per_class nothing is selected; without iou_threshold it is 0
    (any overlap suppresses); without score_threshold every score counts."""
    boxes = random_boxes(1, 15, 0)
    scores = RNG.random((1, 2, 15))
    got = check_nms(nms_model(present=()), nms_feeds(boxes, scores), reference=False)
    assert got.shape == (0, 3)
    got = check_nms(nms_model(present=("max_output_boxes_per_class",)),
                    nms_feeds(boxes, scores, 15), reference=False)
    assert got.shape[0] > 0
    check_nms(nms_model(present=MAX_AND_IOU), nms_feeds(boxes, scores, 15, 0.3))


@pytest.mark.parametrize("opset", [10, 11, 21])
def test_nms_opsets_and_constant_parameters(opset):
    """The usual export: max/iou/score as initializers (a constant max bounds the row count)."""
    initializers = {"max_output_boxes_per_class": np.array([4], np.int64),
                    "iou_threshold": np.array([0.5], np.float32),
                    "score_threshold": np.array(0.25, np.float32)}
    model = nms_model(opset=opset, initializers=initializers)
    kernel = stax.load(model.SerializeToString(), dims_may_be_zero=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batches, classes, spatial in [(1, 1, 5), (2, 3, 40), (1, 2, 0), (3, 1, 17)]:
        feeds = nms_feeds(random_boxes(batches, spatial, 0, 0.2),
                          RNG.random((batches, classes, spatial)))
        got = np.asarray(kernel(**feeds)["selected"])
        assert np.array_equal(got, session.run(None, feeds)[0])
        assert got.shape[0] <= batches * classes * 4


def test_nms_python_builder_with_strided_inputs():
    B, S, C = stax.symbol("B"), stax.symbol("S"), stax.symbol("C")
    boxes = stax.placeholder([B, S, 4], name="boxes")
    scores = stax.placeholder([B, C, S], name="scores")
    kernel = stax.compile(stax.non_max_suppression(boxes, scores, 5, 0.4, 0.1))
    model = nms_model(initializers={"max_output_boxes_per_class": np.array([5], np.int64),
                                    "iou_threshold": np.array([0.4], np.float32),
                                    "score_threshold": np.array([0.1], np.float32)})
    base_boxes = random_boxes(2, 30, 0, 0.2)
    base_scores = RNG.random((2, 30, 3)).astype(np.float32)
    scores_view = base_scores.transpose(0, 2, 1)  # [2, 3, 30], strided
    boxes_view = base_boxes[:, ::-1]  # reversed box order, a negative stride
    want = run_ort(model, {"boxes": np.ascontiguousarray(boxes_view),
                           "scores": np.ascontiguousarray(scores_view)})[0]
    assert np.array_equal(np.asarray(kernel(boxes_view, scores_view)), want)


def test_nms_python_builder_omitted_inputs():
    """Optional inputs left as None are omitted, in the middle too (iou_threshold here)."""
    boxes = stax.placeholder([2, 12, 4], name="boxes")
    scores = stax.placeholder([2, 3, 12], name="scores")
    kernel = stax.compile(stax.non_max_suppression(boxes, scores, 4, None, 0.3))
    model = nms_model(("max_output_boxes_per_class", "score_threshold"),
                      initializers={"max_output_boxes_per_class": np.array([4], np.int64),
                                    "score_threshold": np.array([0.3], np.float32)})
    b, s = random_boxes(2, 12, 0), RNG.random((2, 3, 12)).astype(np.float32)
    assert np.array_equal(np.asarray(kernel(b, s)), run_ort(model, {"boxes": b, "scores": s})[0])
    assert np.asarray(stax.compile(stax.non_max_suppression(boxes, scores))(b, s)).shape == (0, 3)


NMS_LOAD_ERRORS = [
    # boxes shape, scores shape, error, message
    ([2, 5], [1, 1, 5], stax.ShapeError,
     "NonMaxSuppression node 'nms': input 0 'boxes' has rank 2; boxes are [num_batches, "
     "spatial_dimension, 4]"),
    ([1, 5, 4], [1, 5], stax.ShapeError,
     "NonMaxSuppression node 'nms': input 1 'scores' has rank 2"),
    ([1, 5, 5], [1, 1, 5], stax.ShapeError,
     "NonMaxSuppression node 'nms': input 0 'boxes' dim 2 is 5; each box has 4 coordinates"),
    ([2, 5, 4], [3, 1, 5], stax.ShapeError,
     "NonMaxSuppression node 'nms': num_batches mismatch: input 0 'boxes' dim 0 is 2 but "
     "input 1 'scores' dim 0 is 3"),
    ([1, 5, 4], [1, 2, 6], stax.ShapeError,
     "NonMaxSuppression node 'nms': spatial_dimension mismatch: input 0 'boxes' dim 1 is 5 "
     "but input 1 'scores' dim 2 is 6"),
]


@pytest.mark.parametrize("boxes_shape,scores_shape,error,message", NMS_LOAD_ERRORS)
def test_nms_shape_errors_name_node_input_and_dim(boxes_shape, scores_shape, error, message):
    model = nms_model(boxes_shape=boxes_shape, scores_shape=scores_shape)
    with pytest.raises(error) as info:
        stax.load(model.SerializeToString())
    assert message in str(info.value)


def test_nms_run_time_shape_errors_name_input_and_dim():
    """Symbolic dims the model says are equal, fed different: refused before the kernel runs."""
    kernel = stax.load(nms_model(boxes_shape=["B", "S", 4],
                                 scores_shape=["B2", "C", "S2"]).SerializeToString())
    feeds = nms_feeds(random_boxes(2, 5, 0), RNG.random((3, 1, 5)), 3, 0.5, 0.0)
    with pytest.raises(stax.Error, match="scores.*dim 0"):
        kernel(**feeds)
    feeds = nms_feeds(random_boxes(1, 5, 0), RNG.random((1, 1, 6)), 3, 0.5, 0.0)
    with pytest.raises(stax.Error, match="scores.*dim 2"):
        kernel(**feeds)
    kernel = stax.load(nms_model(boxes_shape=["B", "S", "F"]).SerializeToString())
    with pytest.raises(stax.Error, match="boxes.*dim 2"):
        kernel(**nms_feeds(np.zeros((1, 5, 3)), np.zeros((1, 1, 5)), 3, 0.5, 0.0))


def test_nms_attribute_and_threshold_errors():
    with pytest.raises(stax.InvalidArgumentError,
                       match="NonMaxSuppression node 'nms': attribute 'center_point_box' is 2"):
        stax.load(nms_model(center_point_box=2).SerializeToString())
    kernel = stax.load(nms_model().SerializeToString())
    boxes, scores = random_boxes(1, 4, 0), RNG.random((1, 1, 4))
    for iou in (1.5, -0.25, float("nan")):
        with pytest.raises(stax.InvalidArgumentError,
                           match=r"NonMaxSuppression node 'nms': input 3 \(iou_threshold\) is "
                                 r".*; it must be in \[0, 1\]"):
            kernel(**nms_feeds(boxes, scores, 3, iou, 0.0))
    # the same kernel still runs good inputs afterwards
    assert np.asarray(kernel(**nms_feeds(boxes, scores, 3, 0.5, 0.0))["selected"]).shape[1] == 3
    bad = nms_model(boxes_shape=[1, 4, 4], scores_shape=[1, 1, 4])
    bad.graph.input[2].type.tensor_type.shape.dim[0].dim_value = 2
    with pytest.raises(stax.ShapeError, match="input 2 'max_output_boxes_per_class'.*scalar"):
        stax.load(bad.SerializeToString())
    bad = nms_model(boxes_shape=[1, 4, 4], scores_shape=[1, 1, 4])
    bad.graph.input[0].type.tensor_type.elem_type = TensorProto.DOUBLE
    with pytest.raises(stax.DtypeError, match="input 0 'boxes' has dtype float64"):
        stax.load(bad.SerializeToString())


# ---- RoiAlign ------------------------------------------------------------------------------


def roi_model(opset=16, dtype=TensorProto.FLOAT, x_shape=("N", "C", "H", "W"),
              rois_shape=("R", 4), indices_shape=("R",), **attrs):
    node = helper.make_node("RoiAlign", ["x", "rois", "batch_indices"], ["y"], name="roi",
                            **attrs)
    inputs = [helper.make_tensor_value_info("x", dtype, list(x_shape)),
              helper.make_tensor_value_info("rois", dtype, list(rois_shape)),
              helper.make_tensor_value_info("batch_indices", TensorProto.INT64,
                                            list(indices_shape))]
    graph = helper.make_graph([node], "roi", inputs,
                              [helper.make_tensor_value_info("y", dtype, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def random_rois(count, height, width, scale, outside=False, flipped=False):
    """Rois in input coordinates (before spatial_scale); `outside` lets them leave the image
    by up to half its size; `flipped` swaps the corners of some."""
    h, w = height / scale, width / scale
    margin = 0.5 if outside else 0.0
    x1 = RNG.uniform(-margin * w, w * (1 + margin) * 0.8, count)
    y1 = RNG.uniform(-margin * h, h * (1 + margin) * 0.8, count)
    x2 = x1 + RNG.uniform(0, w * 0.6, count)
    y2 = y1 + RNG.uniform(0, h * 0.6, count)
    rois = np.stack([x1, y1, x2, y2], axis=1)
    if flipped:
        swap = RNG.random(count) < 0.4
        rois[swap] = rois[swap][:, [2, 3, 0, 1]]
    return rois.astype(np.float32)


def roi_feeds(x, rois, batch_indices):
    return {"x": x, "rois": rois, "batch_indices": np.asarray(batch_indices, np.int64)}


ROI_RANDOM = [
    # (N, C, H, W), rois, (oh, ow), sampling_ratio, spatial_scale, mode, transform
    ((1, 1, 8, 8), 3, (2, 2), 2, 1.0, "avg", "half_pixel"),
    ((2, 3, 10, 12), 6, (3, 4), 0, 0.75, "avg", "half_pixel"),
    ((2, 3, 10, 12), 6, (3, 4), 0, 0.75, "max", "half_pixel"),
    ((2, 4, 16, 9), 8, (5, 5), 1, 0.5, "avg", "output_half_pixel"),
    ((2, 4, 16, 9), 8, (5, 5), 3, 0.5, "max", "output_half_pixel"),
    ((1, 2, 7, 7), 5, (1, 1), 0, 1.0, "avg", "output_half_pixel"),
    ((3, 2, 20, 20), 10, (7, 7), 2, 0.25, "avg", "half_pixel"),
    ((1, 5, 32, 24), 4, (6, 3), 0, 0.125, "max", "output_half_pixel"),
    ((2, 1, 1, 1), 3, (2, 2), 2, 1.0, "avg", "half_pixel"),
    ((1, 3, 5, 40), 4, (2, 8), 0, 1.0, "avg", "half_pixel"),
]


@pytest.mark.parametrize("x_shape,roi_count,output,sampling,scale,mode,transform", ROI_RANDOM)
def test_roi_align_random_against_onnxruntime_and_reference(x_shape, roi_count, output,
                                                            sampling, scale, mode, transform):
    model = roi_model(output_height=output[0], output_width=output[1], sampling_ratio=sampling,
                      spatial_scale=scale, mode=mode, coordinate_transformation_mode=transform)
    n, _, height, width = x_shape
    for outside in (False, True):
        x = RNG.standard_normal(x_shape).astype(np.float32)
        rois = random_rois(roi_count, height, width, scale, outside=outside)
        feeds = roi_feeds(x, rois, RNG.integers(0, n, roi_count))
        got = run_stax(model, feeds)[0]
        want = run_ort(model, feeds)[0]
        np.testing.assert_array_equal(got, want)  # the same float operations: exact
        np.testing.assert_allclose(got, run_reference(model, feeds)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("sampling", [0, 2])
def test_roi_align_opset_10_has_no_half_pixel_shift(mode, sampling):
    model = roi_model(opset=10, output_height=3, output_width=2, sampling_ratio=sampling,
                      spatial_scale=0.5, mode=mode)
    explicit = roi_model(opset=16, output_height=3, output_width=2, sampling_ratio=sampling,
                         spatial_scale=0.5, mode=mode,
                         coordinate_transformation_mode="output_half_pixel")
    x = RNG.standard_normal((2, 3, 9, 11)).astype(np.float32)
    feeds = roi_feeds(x, random_rois(7, 9, 11, 0.5, outside=True, flipped=True),
                      RNG.integers(0, 2, 7))
    got = run_stax(model, feeds)[0]
    np.testing.assert_array_equal(got, run_ort(model, feeds)[0])
    np.testing.assert_array_equal(got, run_stax(explicit, feeds)[0])
    np.testing.assert_allclose(got, run_reference(explicit, feeds)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_flipped_rois_half_pixel(mode):
    """x2 < x1: with a fixed sampling_ratio the bins run backwards (ORT and the reference
    agree); adaptive sampling gives those bins no samples: 0 (ORT fails, see the top)."""
    x = RNG.standard_normal((1, 2, 10, 10)).astype(np.float32)
    rois = np.array([[8, 8, 2, 2], [1, 6, 7, 2], [3, 3, 3, 3], [2, 2, 6, 6]], np.float32)
    feeds = roi_feeds(x, rois, [0, 0, 0, 0])
    fixed = roi_model(output_height=2, output_width=2, sampling_ratio=2, mode=mode)
    got = run_stax(fixed, feeds)[0]
    np.testing.assert_array_equal(got, run_ort(fixed, feeds)[0])
    adaptive = roi_model(output_height=2, output_width=2, sampling_ratio=0, mode=mode)
    got = run_stax(adaptive, feeds)[0]
    np.testing.assert_allclose(got, run_reference(adaptive, feeds)[0], rtol=1e-5, atol=1e-6)
    assert np.all(got[:3] == 0)


def test_roi_align_rois_entirely_outside_the_image():
    model = roi_model(output_height=2, output_width=3, sampling_ratio=2, mode="avg")
    x = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32) + 5
    rois = np.array([[20, 20, 30, 30], [-30, -30, -10, -10], [-4, 2, 3, 4], [5, 5, 9, 9]],
                    np.float32)
    feeds = roi_feeds(x, rois, [0, 0, 0, 0])
    got = run_stax(model, feeds)[0]
    np.testing.assert_array_equal(got, run_ort(model, feeds)[0])
    assert np.all(got[:2] == 0)
    max_model = roi_model(output_height=2, output_width=3, sampling_ratio=2, mode="max")
    got = run_stax(max_model, feeds)[0]
    np.testing.assert_array_equal(got, run_ort(max_model, feeds)[0])


def test_roi_align_float64_against_onnxruntime():
    model = roi_model(dtype=TensorProto.DOUBLE, output_height=4, output_width=4,
                      sampling_ratio=0, spatial_scale=0.5)
    x = RNG.standard_normal((2, 3, 12, 10))
    feeds = {"x": x, "rois": random_rois(5, 12, 10, 0.5, outside=True).astype(np.float64),
             "batch_indices": RNG.integers(0, 2, 5).astype(np.int64)}
    got = run_stax(model, feeds)[0]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, run_ort(model, feeds)[0])


def test_roi_align_float16_against_float32():
    """ORT has no float16 RoiAlign: stax's float16 result is its float32 one, rounded."""
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float16)
    rois = random_rois(4, 8, 8, 1.0).astype(np.float16)
    feeds = roi_feeds(x, rois, [0, 0, 0, 0])
    half = run_stax(roi_model(dtype=TensorProto.FLOAT16, output_height=2, output_width=2),
                    feeds)[0]
    single = run_stax(roi_model(output_height=2, output_width=2),
                      {k: v.astype(np.float32) if v.dtype == np.float16 else v
                       for k, v in feeds.items()})[0]
    assert half.dtype == np.float16
    np.testing.assert_allclose(half.astype(np.float32), single, rtol=2e-3, atol=2e-3)


def test_roi_align_python_builder_strided_and_changing_shapes():
    N, C, H, W = (stax.symbol(s) for s in "NCHW")
    R = stax.symbol("R", min=0)
    x = stax.placeholder([N, C, H, W], name="x")
    rois = stax.placeholder([R, 4], name="rois")
    indices = stax.placeholder([R], dtype="int64", name="batch_indices")
    kernel = stax.compile(stax.roi_align(x, rois, indices, output_height=3, output_width=2,
                                         sampling_ratio=0, spatial_scale=0.5, mode="avg"))
    model = roi_model(output_height=3, output_width=2, sampling_ratio=0, spatial_scale=0.5)
    for shape, count in [((2, 3, 10, 12), 5), ((1, 4, 7, 5), 1), ((3, 2, 16, 16), 9),
                         ((1, 1, 4, 4), 0)]:
        base = RNG.standard_normal(shape[:1] + shape[2:] + shape[1:2]).astype(np.float32)
        view = base.transpose(0, 3, 1, 2)  # NHWC storage seen as NCHW
        r = random_rois(count, shape[2], shape[3], 0.5, outside=True)
        b = RNG.integers(0, shape[0], count).astype(np.int64)
        want = run_ort(model, roi_feeds(np.ascontiguousarray(view), r, b))[0]
        np.testing.assert_array_equal(np.asarray(kernel(view, r, b)), want)


ROI_LOAD_ERRORS = [
    # x shape, rois shape, indices shape, attributes, error, message
    ([1, 2, 5], [3, 4], [3], {}, stax.ShapeError,
     "RoiAlign node 'roi': input 0 'x' has rank 3; RoiAlign needs X as [N, C, H, W], rank 4"),
    ([1, 2, 5, 5], [4], [3], {}, stax.ShapeError,
     "RoiAlign node 'roi': input 1 'rois' has rank 1; rois are [num_rois, 4], rank 2"),
    ([1, 2, 5, 5], [3, 5], [3], {}, stax.ShapeError,
     "RoiAlign node 'roi': input 1 'rois' dim 1 is 5; each roi has 4 coordinates"),
    ([1, 2, 5, 5], [3, 4], [3, 1], {}, stax.ShapeError,
     "RoiAlign node 'roi': input 2 'batch_indices' has rank 2; batch_indices are [num_rois]"),
    ([1, 2, 5, 5], [3, 4], [2], {}, stax.ShapeError,
     "RoiAlign node 'roi': num_rois mismatch: input 1 'rois' dim 0 is 3 but input 2 "
     "'batch_indices' dim 0 is 2"),
    ([1, 2, 5, 5], [3, 4], [3], {"mode": "sum"}, stax.InvalidArgumentError,
     "RoiAlign node 'roi': attribute 'mode' is 'sum'; it must be 'avg' or 'max'"),
    ([1, 2, 5, 5], [3, 4], [3], {"coordinate_transformation_mode": "asymmetric"},
     stax.InvalidArgumentError, "attribute 'coordinate_transformation_mode' is 'asymmetric'"),
    ([1, 2, 5, 5], [3, 4], [3], {"output_height": 0}, stax.InvalidArgumentError,
     "RoiAlign node 'roi': attributes output_height = 0 and output_width = 1"),
    ([1, 2, 5, 5], [3, 4], [3], {"output_height": 2 ** 30}, stax.InvalidArgumentError,
     "output_height = 1073741824 and output_width = 1; both must be in [1, 16777216]"),
    ([1, 2, 5, 5], [3, 4], [3], {"sampling_ratio": -1}, stax.InvalidArgumentError,
     "RoiAlign node 'roi': attribute 'sampling_ratio' is -1"),
]


@pytest.mark.parametrize("x_shape,rois_shape,indices_shape,attrs,error,message",
                         ROI_LOAD_ERRORS)
def test_roi_align_load_errors_name_node_input_and_dim(x_shape, rois_shape, indices_shape,
                                                       attrs, error, message):
    model = roi_model(x_shape=x_shape, rois_shape=rois_shape, indices_shape=indices_shape,
                      **attrs)
    with pytest.raises(error) as info:
        stax.load(model.SerializeToString())
    assert message in str(info.value)


def test_roi_align_run_time_errors():
    kernel = stax.load(roi_model(output_height=2, output_width=2).SerializeToString())
    x = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    rois = random_rois(3, 6, 6, 1.0)
    for bad in ([0, 2, 1], [0, -1, 0]):
        with pytest.raises(stax.OutOfRangeError) as info:
            kernel(**roi_feeds(x, rois, bad))
        assert (f"RoiAlign node 'roi': input 2 (batch_indices) element 1 is {bad[1]}, outside "
                "input 0 (X) dim 0 of size 2") in str(info.value)
    with pytest.raises(stax.Error, match="batch_indices.*dim 0"):
        kernel(**roi_feeds(x, rois, [0, 1]))
    # an adaptive grid beyond the limit is refused, not allocated
    huge = np.array([[0, 0, 1e12, 1e12]], np.float32)
    with pytest.raises(stax.InvalidArgumentError,
                       match=r"RoiAlign node 'roi': input 1 \(rois\) row 0 needs more than "
                             r"16777216 sample points"):
        kernel(**roi_feeds(x, huge, [0]))
    # the kernel still works afterwards
    good = np.asarray(kernel(**roi_feeds(x, rois, [0, 1, 1]))["y"])
    np.testing.assert_array_equal(good, run_ort(roi_model(output_height=2, output_width=2),
                                                roi_feeds(x, rois, [0, 1, 1]))[0])


@pytest.mark.parametrize("sampling", [0, 2])
def test_roi_align_non_finite_rois(sampling):
    """NaN corners give bins without samples (0); an infinite roi is 0 with a fixed
    sampling_ratio (its samples are not finite) and too large for an adaptive grid."""
    kernel = stax.load(roi_model(output_height=2, output_width=2,
                                 sampling_ratio=sampling).SerializeToString())
    x = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    rois = np.array([[np.nan, 0, 2, 2], [0, 0, 2, np.nan], [1, 1, 3, 3]], np.float32)
    got = np.asarray(kernel(**roi_feeds(x, rois, [0, 0, 0]))["y"])
    assert np.all(got[:2] == 0)
    np.testing.assert_array_equal(got[2:], run_ort(roi_model(output_height=2, output_width=2,
                                                             sampling_ratio=sampling),
                                                   roi_feeds(x, rois[2:], [0]))[0])
    infinite = roi_feeds(x, np.array([[0, 0, np.inf, 2]], np.float32), [0])
    if sampling:
        assert np.all(np.asarray(kernel(**infinite)["y"]) == 0)
    else:
        with pytest.raises(stax.InvalidArgumentError, match="row 0 needs more than"):
            kernel(**infinite)


# ---- a detection post-processing graph and the JIT tier -------------------------------------


def post_processing_model():
    """Scores through Sigmoid, boxes decoded from deltas and anchors, NMS, the kept boxes
    gathered (batch * S + box) and pooled from a feature map by RoiAlign, then Relu: the shape
    of fasterrcnn's head, with dynamic batch, classes, boxes and image size."""
    nodes = [
        helper.make_node("Sigmoid", ["logits"], ["scores"]),
        helper.make_node("Mul", ["deltas", "scale"], ["scaled"]),
        helper.make_node("Add", ["scaled", "anchors"], ["boxes"]),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "threshold"],
                         ["selected"], name="nms"),
        helper.make_node("Gather", ["selected", "two"], ["box_index"], axis=1),
        helper.make_node("Gather", ["selected", "zero"], ["batch_index"], axis=1),
        helper.make_node("Shape", ["boxes"], ["boxes_shape"]),
        helper.make_node("Gather", ["boxes_shape", "one"], ["spatial"], axis=0),
        helper.make_node("Mul", ["batch_index", "spatial"], ["row_base"]),
        helper.make_node("Add", ["row_base", "box_index"], ["row"]),
        helper.make_node("Reshape", ["boxes", "rows_of_4"], ["box_rows"]),
        helper.make_node("Gather", ["box_rows", "row"], ["kept"], axis=0),
        helper.make_node("Mul", ["kept", "four"], ["rois"]),
        helper.make_node("RoiAlign", ["features", "rois", "batch_index"], ["pooled"],
                         name="roi", output_height=3, output_width=3, sampling_ratio=2,
                         spatial_scale=0.25),
        helper.make_node("Relu", ["pooled"], ["y"]),
    ]
    initializers = [
        numpy_helper.from_array(np.array([5], np.int64), "max"),
        numpy_helper.from_array(np.array([0.4], np.float32), "iou"),
        numpy_helper.from_array(np.array([0.3], np.float32), "threshold"),
        numpy_helper.from_array(np.array(2, np.int64), "two"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array([-1, 4], np.int64), "rows_of_4"),
        numpy_helper.from_array(np.array(4.0, np.float32), "four"),
        numpy_helper.from_array(np.array(1.5, np.float32), "scale")]
    graph = helper.make_graph(nodes, "post", [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["B", "C", "S"]),
        helper.make_tensor_value_info("deltas", TensorProto.FLOAT, ["B", "S", 4]),
        helper.make_tensor_value_info("anchors", TensorProto.FLOAT, ["B", "S", 4]),
        helper.make_tensor_value_info("features", TensorProto.FLOAT, ["B", 8, "H", "W"])],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, None),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("jit", ["off", "sync"])
def test_detection_post_processing_matches_onnxruntime_exactly(jit):
    model = post_processing_model()
    options = dict(jit=jit)
    if jit == "sync":
        options.update(jit_threshold=1, jit_verify=True)
    kernel = stax.load(model.SerializeToString(), dims_may_be_zero=True,
                       options=stax.Options(**options))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batches, classes, spatial, size in [(1, 2, 10, 16), (2, 3, 30, 20), (2, 3, 30, 20),
                                            (1, 1, 0, 8), (3, 4, 50, 24)]:
        feeds = {"logits": RNG.standard_normal((batches, classes, spatial)).astype(np.float32),
                 "deltas": RNG.uniform(0, 8, (batches, spatial, 4)).astype(np.float32),
                 "anchors": RNG.uniform(0, 8, (batches, spatial, 4)).astype(np.float32),
                 "features": RNG.standard_normal((batches, 8, size, size)).astype(np.float32)}
        want = session.run(None, feeds)
        got = kernel(**feeds)
        np.testing.assert_array_equal(np.asarray(got["selected"]), want[0])
        np.testing.assert_array_equal(np.asarray(got["y"]), want[1])
    if jit == "sync":
        assert kernel.stats["compiles"] >= 1 and kernel.stats["failures"] == 0


def test_jit_leaves_roi_align_interpreted():
    """RoiAlign -> Relu in one segment: the JIT compiles Relu and interprets RoiAlign's
    group; with verify mode on, the compiled segments agree with the interpreter."""
    node = helper.make_node("RoiAlign", ["x", "rois", "batch_indices"], ["p"], name="roi",
                            output_height=2, output_width=2, sampling_ratio=2)
    graph = helper.make_graph(
        [node, helper.make_node("Relu", ["p"], ["y"])], "roi_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, "H", "W"]),
         helper.make_tensor_value_info("rois", TensorProto.FLOAT, ["R", 4]),
         helper.make_tensor_value_info("batch_indices", TensorProto.INT64, ["R"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    kernel = stax.load(model.SerializeToString(),
                       options=stax.Options(jit="sync", jit_threshold=1, jit_verify=True))
    off = stax.load(model.SerializeToString(), jit="off")
    for shape, count in [((1, 4, 8, 8), 3), ((2, 4, 12, 6), 5)]:
        feeds = roi_feeds(RNG.standard_normal(shape).astype(np.float32),
                          random_rois(count, shape[2], shape[3], 1.0, outside=True),
                          RNG.integers(0, shape[0], count))
        np.testing.assert_array_equal(np.asarray(kernel(**feeds)["y"]),
                                      np.asarray(off(**feeds)["y"]))
        np.testing.assert_array_equal(np.asarray(kernel(**feeds)["y"]),
                                      np.maximum(run_ort(model, feeds)[0], 0))
    source = kernel.source
    assert "group 1 of 2: interpreted (not fusible)" in source
    assert "kernel 2 of 2" in source


def test_default_opset_models_run():
    """helper.make_model's own opset (28 with onnx 1.23: RoiAlign-22, NonMaxSuppression-11).
    ORT 1.32 has no RoiAlign-22 kernel; RoiAlign-22 only adds bfloat16, so opset 16 in ORT is
    the reference."""
    opset_16 = roi_model(output_height=2, output_width=2)
    roi = helper.make_model(opset_16.graph)
    nms = helper.make_model(nms_model().graph)
    assert roi.opset_import[0].version >= 22
    x = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)
    feeds = roi_feeds(x, random_rois(3, 6, 6, 1.0), [0, 0, 0])
    np.testing.assert_array_equal(run_stax(roi, feeds)[0], run_ort(opset_16, feeds)[0])
    feeds = nms_feeds(random_boxes(2, 12, 0), RNG.random((2, 2, 12)), 4, 0.5, 0.2)
    np.testing.assert_array_equal(run_stax(nms, feeds)[0], run_ort(nms, feeds)[0])


def test_roi_align_bfloat16():
    """RoiAlign-22 adds bfloat16 (ORT has no kernel for it): the float32 result, rounded."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    model = helper.make_model(roi_model(dtype=TensorProto.BFLOAT16, output_height=2,
                                        output_width=2).graph)
    x = RNG.standard_normal((1, 2, 6, 6)).astype(ml_dtypes.bfloat16)
    rois = random_rois(3, 6, 6, 1.0).astype(ml_dtypes.bfloat16)
    got = run_stax(model, roi_feeds(x, rois, [0, 0, 0]))[0]
    single = run_stax(roi_model(output_height=2, output_width=2),
                      roi_feeds(x.astype(np.float32), rois.astype(np.float32), [0, 0, 0]))[0]
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(got.astype(np.float32), single, rtol=1e-2, atol=1e-2)
