"""Conformance cases and numpy references for the object-detection ops: NonMaxSuppression and
RoiAlign. The references are transcriptions of the ONNX operator text, in the arithmetic the
op defines for its inputs (float32 IoU; RoiAlign's geometry and sums in the input's
precision), with the choices ONNX leaves open taken as ONNX Runtime takes them: among equal
scores the lower box index first, boxes that only touch (or have no area) never suppress,
and RoiAlign's max mode keeps the largest weighted corner of each sample."""

import math

import numpy as np

from gen_cases import A, multi_run, tol_for


# ---- NonMaxSuppression ---------------------------------------------------------------------

def box_extent(box, center_point_box):
    """(x_min, x_max, y_min, y_max, area) in float32."""
    f = np.float32
    if center_point_box:
        xc, yc, w, h = (f(v) for v in box)
        x_min, x_max = xc - w / f(2), xc + w / f(2)
        y_min, y_max = yc - h / f(2), yc + h / f(2)
    else:
        y1, x1, y2, x2 = (f(v) for v in box)
        x_min, x_max = (x2, x1) if x1 >= x2 else (x1, x2)
        y_min, y_max = (y2, y1) if y1 >= y2 else (y1, y2)
    return x_min, x_max, y_min, y_max, (x_max - x_min) * (y_max - y_min)


def overlaps_too_much(a, b, threshold):
    """IoU(a, b) > threshold; no overlap or no area means no suppression."""
    left, right = max(a[0], b[0]), min(a[1], b[1])
    if right <= left:
        return False
    top, bottom = max(a[2], b[2]), min(a[3], b[3])
    if bottom <= top:
        return False
    intersection = (right - left) * (bottom - top)
    union = a[4] + b[4] - intersection
    if intersection <= 0 or a[4] <= 0 or b[4] <= 0 or union <= 0:
        return False
    return intersection / union > np.float32(threshold)


def nms_reference(boxes, scores, max_out, iou, score_threshold, center_point_box):
    rows = []
    batches, spatial = boxes.shape[:2]
    classes = scores.shape[1]
    max_out = max(int(max_out), 0) if max_out is not None else 0
    iou = np.float32(0 if iou is None else iou)
    for b in range(batches):
        extents = [box_extent(boxes[b, s], center_point_box) for s in range(spatial)]
        for c in range(classes):
            candidates = [s for s in range(spatial) if not np.isnan(scores[b, c, s]) and
                          (score_threshold is None or scores[b, c, s] > score_threshold)]
            candidates.sort(key=lambda s: (-float(scores[b, c, s]), s))
            kept = []
            for s in candidates:
                if len(kept) >= max_out:
                    break
                if any(overlaps_too_much(extents[s], extents[k], iou) for k in kept):
                    continue
                kept.append(s)
                rows.append((b, c, s))
    return np.array(rows, np.int64).reshape(-1, 3)


def nms_boxes(g, batches, spatial, center_point_box):
    if center_point_box:
        centers = g.rng.uniform(0, 10, (batches, spatial, 2))
        sizes = g.rng.uniform(-1, 5, (batches, spatial, 2))  # a few negative sizes
        return np.concatenate([centers, sizes], axis=2).astype(np.float32)
    corners = g.rng.uniform(0, 10, (batches, spatial, 4))  # either diagonal, some flat
    if spatial:
        corners[:, ::5, 2] = corners[:, ::5, 0]  # zero-area boxes
    return corners.astype(np.float32)


def gen_nms(g):
    cases = [  # batches, classes, spatial
        (1, 1, 6), (2, 3, 10), (1, 1, 0), (3, 2, 25), (1, 4, 1), (2, 1, 40), (0, 2, 3),
        (2, 2, 64)]
    for k in range(len(cases) * 3):
        batches, classes, spatial = cases[k % len(cases)]
        center = int(k % 4 == 3)
        boxes = nms_boxes(g, batches, spatial, center)
        if k % 3 == 0:  # ties
            scores = g.rng.integers(0, 4, (batches, classes, spatial)) / 4.0
        else:
            scores = g.rng.random((batches, classes, spatial))
        scores = scores.astype(np.float32)
        max_out = g.choice([0, 1, 3, 10, 100, -1])
        iou = g.choice([0.0, 0.3, 0.5, 0.7, 1.0])
        score_threshold = g.choice([None, 0.0, 0.25, 0.5, 0.9])
        inputs = [g.data(boxes.shape, "float32", value=boxes, free=False),
                  g.data(scores.shape, "float32", value=scores, free=False),
                  g.param([max_out], "int64", scalar=g.chance(0.5)),
                  g.param([iou], "float32", scalar=g.chance(0.5))]
        if score_threshold is not None:
            inputs.append(g.param([score_threshold], "float32", scalar=g.chance(0.5)))
        attrs = [A.i("center_point_box", center)] if center or g.chance(0.3) else []
        g.case(inputs, [nms_reference(boxes, scores, max_out, iou, score_threshold, center)],
               attrs=attrs)
    # Optional inputs left out: without a maximum nothing is selected.
    boxes = nms_boxes(g, 1, 5, 0)
    scores = g.rng.random((1, 2, 5)).astype(np.float32)
    g.case([g.data(boxes.shape, "float32", value=boxes, free=False),
            g.data(scores.shape, "float32", value=scores, free=False)],
           [np.zeros((0, 3), np.int64)])
    g.case([g.data(boxes.shape, "float32", value=boxes, free=False),
            g.data(scores.shape, "float32", value=scores, free=False),
            g.param([4], "int64")],
           [nms_reference(boxes, scores, 4, None, None, 0)])


def nms_runs(g):
    """One program, boxes of several counts: the selected row count changes per run."""
    max_out = g.param([3], "int64", kind="init")
    iou = g.param([0.5], "float32", kind="init")

    def build(shape):
        batches, classes, spatial = shape
        boxes = nms_boxes(g, batches, spatial, 0)
        scores = g.rng.random((batches, classes, spatial)).astype(np.float32)
        return ([g.data(boxes.shape, "float32", value=boxes, free=False, view="c",
                        decl=(-1,)),
                 g.data(scores.shape, "float32", value=scores, free=False, view="c"),
                 max_out, iou],
                [nms_reference(boxes, scores, 3, 0.5, None, 0)], None)
    multi_run(g, build, [(2, 3, 10), (1, 3, 4), (3, 3, 0), (2, 3, 30)])


# ---- RoiAlign ------------------------------------------------------------------------------

def roi_align_reference(x, rois, batch_indices, output_height=1, output_width=1,
                        sampling_ratio=0, spatial_scale=1.0, mode="avg",
                        transform="half_pixel"):
    """ONNX RoiAlign in the input's precision (float32 for float32 and float16)."""
    t = np.float64 if x.dtype == np.float64 else np.float32
    data = x.astype(t)
    roi_values = rois.astype(t)
    n_rois = rois.shape[0]
    _, channels, height, width = x.shape
    out = np.zeros((n_rois, channels, output_height, output_width), t)
    offset = t(0.5) if transform == "half_pixel" else t(0)
    scale = t(np.float32(spatial_scale))

    def axis_samples(start, bin_size, bins, grid, size):
        samples = []
        for p in range(bins):
            for i in range(grid):
                at = start + t(p) * bin_size + (t(i) + t(0.5)) * bin_size / t(grid)
                if size <= 0 or np.isnan(at) or at < -1 or at > size:
                    samples.append(None)
                    continue
                at = max(at, t(0))
                low = int(at)
                if low >= size - 1:
                    low = high = size - 1
                    at = t(low)
                else:
                    high = low + 1
                fraction = at - t(low)
                samples.append((low, high, t(1) - fraction, fraction))
        return samples

    for r in range(n_rois):
        x1, y1, x2, y2 = (v * scale - offset for v in roi_values[r])
        roi_w, roi_h = x2 - x1, y2 - y1
        if transform != "half_pixel":
            roi_w, roi_h = max(roi_w, t(1)), max(roi_h, t(1))
        bin_h, bin_w = roi_h / t(output_height), roi_w / t(output_width)

        def grid_of(extent, bins):
            if sampling_ratio > 0:
                return sampling_ratio
            g = math.ceil(extent / t(bins)) if np.isfinite(extent / t(bins)) else 0
            return max(g, 0)
        grid_h, grid_w = grid_of(roi_h, output_height), grid_of(roi_w, output_width)
        count = t(max(grid_h * grid_w, 1))
        ys = axis_samples(y1, bin_h, output_height, grid_h, height)
        xs = axis_samples(x1, bin_w, output_width, grid_w, width)
        plane = data[batch_indices[r]]
        for ph in range(output_height):
            for pw in range(output_width):
                total = np.zeros(channels, t)
                best = None
                for iy in range(grid_h):
                    ry = ys[ph * grid_h + iy]
                    for ix in range(grid_w):
                        rx = xs[pw * grid_w + ix]
                        if ry is None or rx is None:
                            value = np.zeros(channels, t)
                            corners = [value]
                        else:
                            corners = [ry[2] * rx[2] * plane[:, ry[0], rx[0]],
                                       ry[2] * rx[3] * plane[:, ry[0], rx[1]],
                                       ry[3] * rx[2] * plane[:, ry[1], rx[0]],
                                       ry[3] * rx[3] * plane[:, ry[1], rx[1]]]
                            total = total + (((corners[0] + corners[1]) + corners[2]) +
                                             corners[3])
                        if mode == "max":
                            value = corners[0]
                            for c in corners[1:]:
                                value = np.maximum(value, c)
                            best = value if best is None else np.maximum(best, value)
                if mode == "max":
                    out[r, :, ph, pw] = 0 if best is None else best
                else:
                    out[r, :, ph, pw] = total / count
    return out.astype(x.dtype)


def random_rois(g, count, height, width, scale):
    h, w = height / scale, width / scale
    x1 = g.rng.uniform(-0.3 * w, w, count)
    y1 = g.rng.uniform(-0.3 * h, h, count)
    x2 = x1 + g.rng.uniform(0, 0.8 * w, count)
    y2 = y1 + g.rng.uniform(0, 0.8 * h, count)
    return np.stack([x1, y1, x2, y2], axis=1)


def gen_roi_align(g):
    cases = [  # X shape, rois, output (h, w), sampling_ratio, spatial_scale
        ((1, 1, 6, 6), 2, (2, 2), 2, 1.0), ((2, 3, 10, 12), 5, (3, 4), 0, 0.75),
        ((2, 4, 16, 9), 6, (5, 5), 1, 0.5), ((1, 2, 7, 7), 3, (1, 1), 0, 1.0),
        ((3, 2, 20, 20), 8, (7, 7), 2, 0.25), ((1, 3, 5, 40), 4, (2, 8), 0, 1.0),
        ((2, 2, 8, 8), 0, (2, 2), 2, 1.0), ((1, 1, 1, 1), 2, (2, 3), 3, 1.0)]
    for k in range(len(cases) * 3):
        shape, count, (oh, ow), sampling, scale = cases[k % len(cases)]
        dtype = ["float32", "float64", "float32", "float16"][k % 4]
        mode = g.choice(["avg", "max"])
        transform = g.choice(["half_pixel", "output_half_pixel"])
        x = g.data(shape, dtype, -3, 3)
        rois = random_rois(g, count, shape[2], shape[3], scale).astype(dtype)
        indices = g.rng.integers(0, shape[0], count).astype(np.int64)
        attrs = [A.i("output_height", oh), A.i("output_width", ow),
                 A.i("sampling_ratio", sampling), A.f("spatial_scale", scale),
                 A.s("mode", mode), A.s("coordinate_transformation_mode", transform)]
        expected = roi_align_reference(x.value, rois, indices, oh, ow, sampling, scale, mode,
                                       transform)
        tol = tol_for(dtype, 4.0)
        g.case([x, g.data(rois.shape, dtype, value=rois, free=False),
                g.data(indices.shape, "int64", value=indices, free=False, view="c")],
               [expected], attrs=attrs, tol=tol)


def roi_runs(g):
    attrs = [A.i("output_height", 2), A.i("output_width", 3), A.i("sampling_ratio", 0)]

    def build(shape):
        (n, c, h, w), count = shape
        x = g.data((n, c, h, w), "float32", -3, 3, view="c")
        rois = random_rois(g, count, h, w, 1.0).astype(np.float32)
        indices = g.rng.integers(0, n, count).astype(np.int64)
        return ([x, g.data(rois.shape, "float32", value=rois, free=False, view="c", decl=(-1,)),
                 g.data(indices.shape, "int64", value=indices, free=False, view="c")],
                [roi_align_reference(x.value, rois, indices, 2, 3, 0)], tol_for("float32", 4.0))
    multi_run(g, build, [((2, 3, 8, 10), 4), ((1, 3, 5, 5), 2), ((3, 3, 12, 6), 7),
                         ((2, 3, 9, 9), 1)], attrs=attrs)


def with_runs(generate, runs):
    def both(g):
        generate(g)
        runs(g)
    return both


GENERATORS = {
    "NonMaxSuppression": with_runs(gen_nms, nms_runs),
    "RoiAlign": with_runs(gen_roi_align, roi_runs),
}
