"""Op builders: one generic builder per ONNX op (``stax.ops.LeakyRelu(x, alpha=0.1)``, made
from the schema table in _optable.py), and numpy-like functions on top (``stax.add``,
``stax.softmax(x, axis=-1)``, ``stax.reshape(x, [B, -1])``, ``stax.conv(x, w, strides=2)``).

Every builder returns a lazy :class:`stax.Expr` (a tuple of them for ops with several
outputs); nothing runs until the expressions are compiled.
"""

import numpy as np

from . import _C
from ._dims import Dim
from ._expr import Expr, apply, as_operand, constant
from ._optable import SCHEMAS

_ONNX_CODES = {name: code for name, _, code in _C.dtypes()}


def _attr_value(op, name, kind, value):
    """(C kind, value) for an attribute of the schema's KIND."""
    if kind == "INT":
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise TypeError(f"{op} attribute '{name}' is an integer, got {value!r}")
        return "int", int(value)
    if kind == "FLOAT":
        return "float", float(value)
    if kind == "STRING":
        if not isinstance(value, str):
            raise TypeError(f"{op} attribute '{name}' is a string, got {value!r}")
        return "string", value
    if kind == "INTS":
        values = [value] if isinstance(value, (int, np.integer)) else list(value)
        if any(isinstance(v, Dim) for v in values):
            raise TypeError(f"{op} attribute '{name}' must be constant ints (symbolic dims are "
                            "not allowed in attributes)")
        return "ints", [int(v) for v in values]
    if kind == "FLOATS":
        values = [value] if isinstance(value, (int, float, np.number)) else list(value)
        return "floats", [float(v) for v in values]
    if kind == "STRINGS":
        return "strings", [str(v) for v in value]
    if kind == "TENSOR":
        array = np.asarray(value)
        if array.dtype == np.float64 and not isinstance(value, np.ndarray):
            array = array.astype(np.float32)
        return "tensor", np.ascontiguousarray(array)
    if kind == "DTYPE":
        dtype = _C.parse_dtype(value)
        return "int", _ONNX_CODES[dtype]
    if kind == "GRAPH":
        from ._lower import Subgraph
        if not isinstance(value, Subgraph):
            raise TypeError(f"{op} attribute '{name}' is a subgraph: build it with stax.cond or "
                            "stax.loop")
        return "graph", value
    raise ValueError(f"unknown attribute kind {kind}")


def _output_count(schema, attrs, outputs):
    if outputs is not None:
        count = int(outputs)
    elif schema.name == "Split" and "num_outputs" in attrs:
        count = attrs["num_outputs"][1]
    elif schema.name == "Split" and "split" in attrs:
        count = len(attrs["split"][1])
    else:
        count = schema.min_outputs
    low, high = schema.min_outputs, schema.max_outputs
    if count < low or (high is not None and count > high):
        bound = "any number" if high is None else f"at most {high}"
        raise ValueError(f"{schema.name} has at least {low} and {bound} outputs; asked for {count}")
    return count


def make_builder(schema):
    """The generic builder of one ONNX op: inputs positionally or by their ONNX names,
    attributes by their ONNX names (``attrs={...}`` also works, and wins when an attribute and
    an input share a name, like ReduceSum's axes), ``outputs=n`` for ops with optional outputs,
    ``name=`` for the node."""
    input_names = [spec.name for spec in schema.inputs]

    def build(*args, name=None, outputs=None, attrs=None, **kwargs):
        values, roles = [], []
        positional = list(args)
        for spec in schema.inputs:
            if spec.variadic:
                items = positional
                positional = []
                if spec.name in kwargs:
                    items = items + list(kwargs.pop(spec.name))
                if len(items) == 1 and isinstance(items[0], (list, tuple)) and not isinstance(
                        items[0], Expr) and schema.name not in ("Loop",):
                    items = list(items[0])
                values.extend(items)
                roles.extend(spec.role * len(items))
                continue
            if positional:
                value = positional.pop(0)
                if spec.name in kwargs:
                    raise TypeError(f"{schema.name}: input '{spec.name}' given twice")
            else:
                value = kwargs.pop(spec.name, None)
            if value is None and not spec.optional:
                raise TypeError(f"{schema.name}: missing input '{spec.name}' (inputs: "
                                f"{', '.join(input_names) or 'none'})")
            values.append(value)
            roles.append(spec.role)
        if positional:
            raise TypeError(f"{schema.name} takes {len(schema.inputs)} inputs "
                            f"({', '.join(input_names)}), got {len(args)}")
        converted = {}
        for key, value in list(kwargs.items()) + list((attrs or {}).items()):
            if key not in schema.attrs:
                known = sorted(set(schema.attrs) | set(input_names))
                raise TypeError(f"{schema.name} has no input or attribute '{key}' (it takes: "
                                f"{', '.join(known) or 'nothing'})")
            if value is None:
                continue
            converted[key] = _attr_value(schema.name, key, schema.attrs[key], value)
        count = _output_count(schema, converted, outputs)
        while values and values[-1] is None:
            values.pop()
            roles.pop()
        return apply(schema.name, values, "".join(roles), converted, count, name)

    build.__name__ = schema.name
    build.__qualname__ = schema.name
    attrs_text = ", ".join(f"{k}: {v}" for k, v in schema.attrs.items()) or "none"
    build.__doc__ = (f"ONNX {schema.name}. Inputs: {', '.join(input_names) or 'none'}. "
                     f"Attributes: {attrs_text}.")
    return build


class _OnnxOps:
    """Every op of include/stax/ops.def by its ONNX name: ``stax.ops.Gelu(x,
    approximate="tanh")``, ``stax.ops.Split(x, num_outputs=3)``. ONNX semantics and defaults."""

    def __init__(self):
        for name, schema in SCHEMAS.items():
            setattr(self, name, make_builder(schema))

    def __dir__(self):
        return sorted(SCHEMAS)

    def __repr__(self):
        return f"<stax.ops: {len(SCHEMAS)} ONNX ops>"


ops = _OnnxOps()


def op(op_type, *inputs, **kwargs):
    """Any op by ONNX name: ``stax.op("Gemm", a, b, c, transB=1)``."""
    builder = getattr(ops, op_type, None)
    if builder is None:
        raise _C.UnimplementedError(f"stax has no op '{op_type}'")
    return builder(*inputs, **kwargs)


# ---- helpers ---------------------------------------------------------------------------------


def _axes(axis):
    if axis is None:
        return None
    if isinstance(axis, (list, tuple)):
        return [int(a) for a in axis]
    return [int(axis)]


def _rank(x):
    if isinstance(x, Expr):
        return x.ndim
    return np.ndim(x)


def _dtype(x):
    if isinstance(x, Expr):
        return x.dtype
    return None


def _is_int_dtype(dtype):
    return dtype is not None and (dtype.startswith("int") or dtype.startswith("uint"))


def _spatial_ints(value, count, what):
    if value is None:
        return None
    if isinstance(value, (int, np.integer)):
        return [int(value)] * count
    values = [int(v) for v in value]
    if len(values) != count:
        raise ValueError(f"{what} needs {count} values (one per spatial dim), got {values}")
    return values


def _pads(padding, count):
    """An int, one value per spatial dim, (begin, end) pairs, or ONNX's flat
    [begin..., end...]."""
    if padding is None:
        return None
    if isinstance(padding, (int, np.integer)):
        return [int(padding)] * (2 * count)
    values = list(padding)
    if values and isinstance(values[0], (list, tuple)):
        return [int(p[0]) for p in values] + [int(p[1]) for p in values]
    if len(values) == count:
        return [int(v) for v in values] * 2
    if len(values) == 2 * count:
        return [int(v) for v in values]
    raise ValueError(f"padding needs 1, {count} or {2 * count} values, got {values}")


# ---- elementwise ---------------------------------------------------------------------------


def add(a, b, name=None):
    """a + b, with numpy broadcasting (ONNX Add)."""
    return ops.Add(a, b, name=name)


def subtract(a, b, name=None):
    """a - b, broadcasting (ONNX Sub)."""
    return ops.Sub(a, b, name=name)


def multiply(a, b, name=None):
    """a * b, broadcasting (ONNX Mul)."""
    return ops.Mul(a, b, name=name)


def divide(a, b, name=None):
    """ONNX Div: true division for floats; integer division truncates toward zero (use
    floor_divide for numpy's //)."""
    return ops.Div(a, b, name=name)


def power(a, b, name=None):
    """a ** b, broadcasting (ONNX Pow)."""
    return ops.Pow(a, b, name=name)


def fmod(a, b, name=None):
    """C fmod: the remainder has the dividend's sign (ONNX Mod with fmod=1)."""
    return ops.Mod(a, b, fmod=1, name=name)


def remainder(a, b, name=None):
    """numpy's % (the remainder has the divisor's sign)."""
    dtype = _dtype(a) or _dtype(b)
    if _is_int_dtype(dtype):
        return ops.Mod(a, b, fmod=0, name=name)
    return subtract(a, multiply(floor(divide(a, b)), b), name=name)


def floor_divide(a, b, name=None):
    """numpy's // : floor of the quotient, for integers and floats."""
    dtype = _dtype(a) or _dtype(b)
    if _is_int_dtype(dtype):
        return divide(subtract(a, ops.Mod(a, b, fmod=0)), b, name=name)
    return floor(divide(a, b), name=name)


def bitwise_left_shift(a, b, name=None):
    """a << b on unsigned integers (ONNX BitShift LEFT)."""
    return ops.BitShift(a, b, direction="LEFT", name=name)


def bitwise_right_shift(a, b, name=None):
    """a >> b on unsigned integers (ONNX BitShift RIGHT)."""
    return ops.BitShift(a, b, direction="RIGHT", name=name)


def logical_and(a, b, name=None):
    """Elementwise and of two bool tensors (ONNX And)."""
    return ops.And(a, b, name=name)


def logical_or(a, b, name=None):
    """Elementwise or of two bool tensors (ONNX Or)."""
    return ops.Or(a, b, name=name)


def logical_xor(a, b, name=None):
    """Elementwise exclusive or of two bool tensors (ONNX Xor)."""
    return ops.Xor(a, b, name=name)


def logical_not(x, name=None):
    """Elementwise not of a bool tensor (ONNX Not)."""
    return ops.Not(x, name=name)


def equal(a, b, name=None):
    """a == b as bool, broadcasting (ONNX Equal)."""
    return ops.Equal(a, b, name=name)


def not_equal(a, b, name=None):
    """a != b as bool, broadcasting (ONNX Not of Equal)."""
    return ops.Not(ops.Equal(a, b), name=name)


def less(a, b, name=None):
    """a < b as bool, broadcasting (ONNX Less)."""
    return ops.Less(a, b, name=name)


def less_equal(a, b, name=None):
    """a <= b as bool, broadcasting (ONNX LessOrEqual)."""
    return ops.LessOrEqual(a, b, name=name)


def greater(a, b, name=None):
    """a > b as bool, broadcasting (ONNX Greater)."""
    return ops.Greater(a, b, name=name)


def greater_equal(a, b, name=None):
    """a >= b as bool, broadcasting (ONNX GreaterOrEqual)."""
    return ops.GreaterOrEqual(a, b, name=name)


def maximum(*xs, name=None):
    """Elementwise maximum of two or more tensors (ONNX Max)."""
    return ops.Max(*xs, name=name)


def minimum(*xs, name=None):
    """Elementwise minimum of any number of tensors, broadcasting (ONNX Min)."""
    return ops.Min(*xs, name=name)


def add_n(*xs, name=None):
    """Elementwise sum of any number of tensors (ONNX Sum)."""
    return ops.Sum(*xs, name=name)


def mean_n(*xs, name=None):
    """Elementwise mean of any number of tensors (ONNX Mean)."""
    return ops.Mean(*xs, name=name)


def where(condition, x, y, name=None):
    """x where condition is true, else y, broadcasting (ONNX Where)."""
    return ops.Where(condition, x, y, name=name)


def prelu(x, slope, name=None):
    """x where x >= 0, else slope * x; slope broadcasts against x (ONNX PRelu)."""
    return ops.PRelu(x, slope, name=name)


def _unary(onnx_name, doc=None):
    builder = getattr(ops, onnx_name)

    def function(x, name=None):
        return builder(x, name=name)

    function.__doc__ = doc or f"Elementwise ONNX {onnx_name}."
    return function


relu = _unary("Relu")
sigmoid = _unary("Sigmoid")
hard_swish = _unary("HardSwish")
softsign = _unary("Softsign")
softplus = _unary("Softplus")
tanh = _unary("Tanh")
exp = _unary("Exp")
log = _unary("Log")
sqrt = _unary("Sqrt")
reciprocal = _unary("Reciprocal")
negative = _unary("Neg")
absolute = _unary("Abs")
abs = absolute  # noqa: A001 - numpy has it too
erf = _unary("Erf")
sin = _unary("Sin")
cos = _unary("Cos")
tan = _unary("Tan")
arcsin = _unary("Asin")
arccos = _unary("Acos")
arctan = _unary("Atan")
sinh = _unary("Sinh")
cosh = _unary("Cosh")
arcsinh = _unary("Asinh")
arccosh = _unary("Acosh")
arctanh = _unary("Atanh")
floor = _unary("Floor")
ceil = _unary("Ceil")
round = _unary("Round", "Round half to even, like numpy.round.")  # noqa: A001
sign = _unary("Sign")
isnan = _unary("IsNaN")
identity = _unary("Identity")
global_avg_pool = _unary("GlobalAveragePool", "Mean over the spatial dims (keeps them as 1).")
global_max_pool = _unary("GlobalMaxPool", "Max over the spatial dims (keeps them as 1).")
nonzero = _unary("NonZero", "Indices of the nonzero elements: int64[rank, count], count known "
                            "at run time.")
size = _unary("Size", "Element count as an int64 scalar.")


def leaky_relu(x, alpha=0.01, name=None):
    """x where x >= 0, else alpha * x (ONNX LeakyRelu)."""
    return ops.LeakyRelu(x, alpha=alpha, name=name)


def elu(x, alpha=1.0, name=None):
    """x where x >= 0, else alpha * (exp(x) - 1) (ONNX Elu)."""
    return ops.Elu(x, alpha=alpha, name=name)


def selu(x, alpha=None, gamma=None, name=None):
    """gamma * (x where x > 0, else alpha * (exp(x) - 1)) (ONNX Selu; None: ONNX's defaults)."""
    return ops.Selu(x, alpha=alpha, gamma=gamma, name=name)


def celu(x, alpha=1.0, name=None):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) (ONNX Celu)."""
    return ops.Celu(x, alpha=alpha, name=name)


def thresholded_relu(x, alpha=1.0, name=None):
    """x where x > alpha, else 0 (ONNX ThresholdedRelu)."""
    return ops.ThresholdedRelu(x, alpha=alpha, name=name)


def gelu(x, approximate="none", name=None):
    """GELU; approximate='tanh' for the tanh approximation."""
    return ops.Gelu(x, approximate=approximate, name=name)


def hard_sigmoid(x, alpha=0.2, beta=0.5, name=None):
    """max(0, min(1, alpha * x + beta)) (ONNX HardSigmoid)."""
    return ops.HardSigmoid(x, alpha=alpha, beta=beta, name=name)


def shrink(x, bias=0.0, lambd=0.5, name=None):
    """x - bias where x > lambd, x + bias where x < -lambd, else 0 (ONNX Shrink)."""
    return ops.Shrink(x, bias=bias, lambd=lambd, name=name)


def clip(x, min=None, max=None, name=None):  # noqa: A002 - numpy's names
    """x limited to [min, max]; None leaves that side open (ONNX Clip)."""
    return ops.Clip(x, min, max, name=name)


def isinf(x, detect_negative=True, detect_positive=True, name=None):
    """True where x is infinite, of the signs asked for (ONNX IsInf)."""
    return ops.IsInf(x, detect_negative=int(detect_negative),
                     detect_positive=int(detect_positive), name=name)


def cast(x, dtype, name=None):
    """Converts to dtype (ONNX Cast: float to int truncates toward zero)."""
    return ops.Cast(x, to=dtype, name=name)


astype = cast


def cast_like(x, like, name=None):
    """x converted to the dtype of `like` (ONNX CastLike)."""
    return ops.CastLike(x, like, name=name)


def dropout(x, ratio=None, training=False, seed=None, return_mask=False, name=None):
    """Dropout; the identity unless training=True."""
    training_value = np.asarray(True) if training else None
    return ops.Dropout(x, ratio, training_value, seed=seed, outputs=2 if return_mask else 1,
                       name=name)


# ---- reductions ------------------------------------------------------------------------------


def _reduce(onnx_name):
    builder = getattr(ops, onnx_name)

    def function(x, axis=None, keepdims=False, name=None):
        axes = _axes(axis)
        return builder(x, axes, keepdims=int(bool(keepdims)), name=name)

    function.__doc__ = (f"ONNX {onnx_name} over `axis` (an int, a list, or None for all), "
                        "numpy-style: keepdims=False by default.")
    return function


sum = _reduce("ReduceSum")  # noqa: A001
mean = _reduce("ReduceMean")
max = _reduce("ReduceMax")  # noqa: A001
min = _reduce("ReduceMin")  # noqa: A001
prod = _reduce("ReduceProd")
reduce_l1 = _reduce("ReduceL1")
reduce_l2 = _reduce("ReduceL2")
reduce_sum_square = _reduce("ReduceSumSquare")
reduce_log_sum = _reduce("ReduceLogSum")
reduce_log_sum_exp = _reduce("ReduceLogSumExp")
logsumexp = reduce_log_sum_exp


def _arg_reduce(onnx_name):
    builder = getattr(ops, onnx_name)

    def function(x, axis=None, keepdims=False, select_last_index=False, name=None):
        if axis is None:
            x = reshape(x, [-1])
            axis = 0
        return builder(x, axis=int(axis), keepdims=int(bool(keepdims)),
                       select_last_index=int(bool(select_last_index)), name=name)

    function.__doc__ = (f"ONNX {onnx_name} (int64 indices); axis=None searches the flattened "
                        "tensor, like numpy.")
    return function


argmax = _arg_reduce("ArgMax")
argmin = _arg_reduce("ArgMin")


def softmax(x, axis=-1, name=None):
    """exp(x) / sum(exp(x)) along axis, computed stably (ONNX Softmax)."""
    return ops.Softmax(x, axis=axis, name=name)


def log_softmax(x, axis=-1, name=None):
    """log(softmax(x)) along axis, computed stably (ONNX LogSoftmax)."""
    return ops.LogSoftmax(x, axis=axis, name=name)


def hardmax(x, axis=-1, name=None):
    """1 at the first maximum along axis, 0 elsewhere (ONNX Hardmax)."""
    return ops.Hardmax(x, axis=axis, name=name)


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """Cumulative sum along axis; exclusive leaves out the element itself, reverse sums from
    the end (ONNX CumSum)."""
    return ops.CumSum(x, np.asarray(int(axis), dtype=np.int64), exclusive=int(bool(exclusive)),
                      reverse=int(bool(reverse)), name=name)


def nll_loss(input, target, weight=None, reduction="mean", ignore_index=None, name=None):  # noqa: A002
    """Negative log likelihood loss of log-probabilities `input` for class indices `target`
    (ONNX NegativeLogLikelihoodLoss)."""
    return ops.NegativeLogLikelihoodLoss(input, target, weight, reduction=reduction,
                                         ignore_index=ignore_index, name=name)


def softmax_cross_entropy(scores, labels, weights=None, reduction="mean", ignore_index=None,
                          return_log_prob=False, name=None):
    """Cross entropy of softmax(scores) against class indices `labels` (ONNX
    SoftmaxCrossEntropyLoss)."""
    return ops.SoftmaxCrossEntropyLoss(scores, labels, weights, reduction=reduction,
                                       ignore_index=ignore_index,
                                       outputs=2 if return_log_prob else 1, name=name)


# ---- normalization ---------------------------------------------------------------------------


def layer_norm(x, scale, bias=None, axis=-1, epsilon=1e-5, return_stats=False, name=None):
    """LayerNormalization over the dims from `axis` on; return_stats=True also returns the
    mean and inverse standard deviation."""
    return ops.LayerNormalization(x, scale, bias, axis=axis, epsilon=epsilon,
                                  outputs=3 if return_stats else 1, name=name)


def batch_norm(x, scale, bias, mean, var, epsilon=1e-5, momentum=None, name=None):  # noqa: A002
    """Inference-mode BatchNormalization with running mean and variance."""
    return ops.BatchNormalization(x, scale, bias, mean, var, epsilon=epsilon, momentum=momentum,
                                  name=name)


def instance_norm(x, scale, bias, epsilon=1e-5, name=None):
    """Normalizes each channel of each sample over its spatial dims, then scales and shifts per
    channel (ONNX InstanceNormalization)."""
    return ops.InstanceNormalization(x, scale, bias, epsilon=epsilon, name=name)


def local_response_norm(x, size, alpha=1e-4, beta=0.75, bias=1.0, name=None):
    """LRN (AlexNet's local response normalization): x (N, C, D1, ...) divided by
    (bias + alpha / size * sum of squares over `size` neighbouring channels) ** beta."""
    return ops.LRN(x, size=size, alpha=alpha, beta=beta, bias=bias, name=name)


# ---- linear algebra --------------------------------------------------------------------------


def matmul(a, b, name=None):
    """a @ b with numpy's rules: batch dims broadcast, 1-D operands are vectors (ONNX MatMul)."""
    return ops.MatMul(a, b, name=name)


def gemm(a, b, c=None, alpha=1.0, beta=1.0, trans_a=False, trans_b=False, name=None):
    """alpha * op(a) @ op(b) + beta * c, op transposing when trans_* is set."""
    return ops.Gemm(a, b, c, alpha=alpha, beta=beta, transA=int(bool(trans_a)),
                    transB=int(bool(trans_b)), name=name)


def einsum(equation, *operands, name=None):
    """Einstein summation over the operands, like numpy.einsum (ONNX Einsum)."""
    return ops.Einsum(*operands, equation=equation, name=name)


# ---- convolution and pooling ------------------------------------------------------------------


def _spatial_count(x, w=None):
    if w is not None:
        return _rank(w) - 2
    return _rank(x) - 2


def conv(x, w, b=None, strides=None, padding=None, dilations=None, groups=1, auto_pad=None,
         name=None):
    """N-d convolution (NCHW...). strides/dilations: an int or one per spatial dim; padding: an
    int, one per spatial dim, (begin, end) pairs, or ONNX's flat list; auto_pad: 'SAME_UPPER',
    'SAME_LOWER' or 'VALID'."""
    n = _spatial_count(x, w)
    return ops.Conv(x, w, b, strides=_spatial_ints(strides, n, "strides"), pads=_pads(padding, n),
                    dilations=_spatial_ints(dilations, n, "dilations"), group=groups,
                    auto_pad=auto_pad, name=name)


def conv_transpose(x, w, b=None, strides=None, padding=None, dilations=None, groups=1,
                   output_padding=None, output_shape=None, auto_pad=None, name=None):
    """Transposed convolution (the gradient of conv), weights [C_in, C_out / groups, k...]
    (ONNX ConvTranspose)."""
    n = _spatial_count(x, w)
    return ops.ConvTranspose(x, w, b, strides=_spatial_ints(strides, n, "strides"),
                             pads=_pads(padding, n),
                             dilations=_spatial_ints(dilations, n, "dilations"), group=groups,
                             output_padding=_spatial_ints(output_padding, n, "output_padding"),
                             output_shape=output_shape, auto_pad=auto_pad, name=name)


def max_pool(x, kernel_shape, strides=None, padding=None, dilations=None, ceil_mode=False,
             auto_pad=None, return_indices=False, name=None):
    """Max over sliding windows of the spatial dims; return_indices also gives the flat indices
    of the maxima (ONNX MaxPool)."""
    n = _spatial_count(x)
    return ops.MaxPool(x, kernel_shape=_spatial_ints(kernel_shape, n, "kernel_shape"),
                       strides=_spatial_ints(strides, n, "strides"), pads=_pads(padding, n),
                       dilations=_spatial_ints(dilations, n, "dilations"),
                       ceil_mode=int(bool(ceil_mode)), auto_pad=auto_pad,
                       outputs=2 if return_indices else 1, name=name)


def avg_pool(x, kernel_shape, strides=None, padding=None, ceil_mode=False,
             count_include_pad=False, auto_pad=None, name=None):
    """Mean over sliding windows of the spatial dims (ONNX AveragePool)."""
    n = _spatial_count(x)
    return ops.AveragePool(x, kernel_shape=_spatial_ints(kernel_shape, n, "kernel_shape"),
                           strides=_spatial_ints(strides, n, "strides"), pads=_pads(padding, n),
                           ceil_mode=int(bool(ceil_mode)),
                           count_include_pad=int(bool(count_include_pad)), auto_pad=auto_pad,
                           name=name)


# ---- data movement ---------------------------------------------------------------------------


def reshape(x, shape, allowzero=False, name=None):
    """New dims: ints (-1 infers one dim, 0 copies the input's unless allowzero), symbolic dims
    (computed at run time), or an int64 tensor expression."""
    if isinstance(shape, (int, Dim)):
        shape = [shape]
    return ops.Reshape(x, shape, allowzero=int(bool(allowzero)) if allowzero else None, name=name)


def flatten(x, axis=1, name=None):
    """ONNX Flatten: a 2-d tensor [prod(dims[:axis]), prod(dims[axis:])]. (Expr.flatten()
    gives numpy's 1-d flatten.)"""
    return ops.Flatten(x, axis=axis, name=name)


def transpose(x, axes=None, name=None):
    """x with its dims permuted (default: reversed), like numpy.transpose (ONNX Transpose)."""
    return ops.Transpose(x, perm=None if axes is None else [int(a) for a in axes], name=name)


def permute_dims(x, axes, name=None):
    """x with its dims in the order `axes` (the array API's name for transpose)."""
    return transpose(x, axes, name=name)


def squeeze(x, axis=None, name=None):
    """x without the size-1 dims listed (all of them when axis is None) (ONNX Squeeze)."""
    return ops.Squeeze(x, _axes(axis), name=name)


def expand_dims(x, axis, name=None):
    """x with new size-1 dims at the positions listed (ONNX Unsqueeze)."""
    return ops.Unsqueeze(x, _axes(axis), name=name)


unsqueeze = expand_dims


def concat(xs, axis=0, name=None):
    """The tensors joined along an existing axis (ONNX Concat)."""
    return ops.Concat(*xs, axis=axis, name=name)


concatenate = concat


def stack(xs, axis=0, name=None):
    """The tensors (one shape) joined along a new axis."""
    return concat([expand_dims(x, axis) for x in xs], axis=axis, name=name)


def split(x, sections, axis=0, name=None):
    """Splits along axis into `sections` equal parts (an int) or parts of the given sizes (a
    list; ONNX semantics, unlike numpy's split points). Returns a tuple."""
    if isinstance(sections, (int, np.integer)):
        parts = ops.Split(x, axis=axis, num_outputs=int(sections), name=name)
    else:
        sizes = list(sections)
        parts = ops.Split(x, sizes, axis=axis, outputs=len(sizes), name=name)
    return parts if isinstance(parts, tuple) else (parts,)


def slice(x, starts, ends, axes=None, steps=None, name=None):  # noqa: A001
    """ONNX Slice (Python indexing x[a:b:c] builds this too)."""
    return ops.Slice(x, _axes(starts) if isinstance(starts, int) else starts,
                     _axes(ends) if isinstance(ends, int) else ends,
                     _axes(axes) if isinstance(axes, int) else axes,
                     _axes(steps) if isinstance(steps, int) else steps, name=name)


def gather(x, indices, axis=0, name=None):
    """Slices of x along axis at the given indices, like numpy.take (ONNX Gather)."""
    return ops.Gather(x, indices, axis=axis, name=name)


take = gather


def gather_elements(x, indices, axis=0, name=None):
    """Elements of x picked along axis by an index tensor of x's rank, like
    numpy.take_along_axis (ONNX GatherElements)."""
    return ops.GatherElements(x, indices, axis=axis, name=name)


take_along_axis = gather_elements


def gather_nd(x, indices, batch_dims=0, name=None):
    """Slices of x addressed by the last dim of indices (ONNX GatherND)."""
    return ops.GatherND(x, indices, batch_dims=batch_dims, name=name)


def scatter_elements(x, indices, updates, axis=0, reduction=None, name=None):
    """A copy of x with updates written at indices along axis (reduction: None, 'add', 'mul',
    'min', 'max') (ONNX ScatterElements)."""
    return ops.ScatterElements(x, indices, updates, axis=axis, reduction=reduction, name=name)


def scatter_nd(x, indices, updates, reduction=None, name=None):
    """A copy of x with updates written at the slices indices address (ONNX ScatterND)."""
    return ops.ScatterND(x, indices, updates, reduction=reduction, name=name)


def expand(x, shape, name=None):
    """Broadcasts to shape (numpy rules: dims of 1 stretch); dims may be symbolic."""
    return ops.Expand(x, list(shape) if not isinstance(shape, Expr) else shape, name=name)


broadcast_to = expand


def tile(x, reps, name=None):
    """x repeated reps[i] times along each dim i (ONNX Tile)."""
    return ops.Tile(x, list(reps) if not isinstance(reps, Expr) else reps, name=name)


def pad(x, pad_width, mode="constant", constant_value=None, axes=None, name=None):
    """pad_width: numpy's [(before, after), ...] per axis, or ONNX's flat [begins..., ends...];
    mode 'constant', 'reflect', 'edge' or 'wrap'."""
    values = list(pad_width)
    if values and isinstance(values[0], (list, tuple)):
        values = [p[0] for p in values] + [p[1] for p in values]
    return ops.Pad(x, values, constant_value, _axes(axes), mode=mode, name=name)


def shape(x, start=None, end=None, name=None):
    """The dims of x as an int64 tensor (ONNX Shape); use x.shape for the symbolic dims."""
    return ops.Shape(x, start=start, end=end, name=name)


def full(shape, fill_value, dtype=None, name=None):  # noqa: A002 - shadows the function
    """A tensor of the given shape (dims may be symbolic) filled with fill_value."""
    value = np.asarray(fill_value, dtype=None if dtype is None else _C.parse_dtype(dtype))
    if dtype is None and value.dtype == np.float64:
        value = value.astype(np.float32)
    return ops.ConstantOfShape(list(shape) if not isinstance(shape, Expr) else shape,
                               value=value.reshape(1), name=name)


def zeros(shape, dtype="float32", name=None):  # noqa: A002
    """A tensor of zeros of the given shape (ints or dims) and dtype."""
    return full(shape, 0, dtype, name=name)


def ones(shape, dtype="float32", name=None):  # noqa: A002
    """A tensor of ones of the given shape (ints or dims) and dtype."""
    return full(shape, 1, dtype, name=name)


def arange(start, stop=None, step=1, dtype=None, name=None):
    """numpy.arange (ONNX Range): arange(stop), arange(start, stop, step); bounds may be symbolic
    dims or scalar expressions."""
    if stop is None:
        start, stop = 0, start
    values = [_scalar(v) for v in (start, stop, step)]
    if dtype is not None:
        values = [cast(v, dtype) if isinstance(v, Expr) else np.asarray(v, dtype=_C.parse_dtype(dtype))
                  for v in values]
    elif not any(isinstance(v, Expr) for v in values):
        kinds = {np.asarray(v).dtype.kind for v in values}
        target = np.float32 if "f" in kinds else np.int64
        values = [np.asarray(v, dtype=target) for v in values]
    return ops.Range(*values, name=name)


def _scalar(value):
    """A symbolic dim as an int64 scalar expression; anything else as is."""
    if isinstance(value, Dim):
        return reshape(as_expr(as_operand(value, "i")), [])
    return value


def as_expr(value):
    """A constant operand as an expression of its own (used for symbolic dims)."""
    if isinstance(value, Expr):
        return value
    return ops.Identity(value)


def resize(x, scales=None, sizes=None, roi=None, mode="nearest", axes=None, name=None,
           **attrs):
    """ONNX Resize by scales (floats) or sizes (ints, may be symbolic); other ONNX attributes
    (coordinate_transformation_mode, nearest_mode, cubic_coeff_a, ...) as keywords."""
    return ops.Resize(x, roi, scales, sizes, mode=mode, axes=_axes(axes), name=name, **attrs)


def triu(x, k=0, name=None):
    """The upper triangle of the last two dims, from diagonal k up; the rest zero (ONNX Trilu)."""
    return ops.Trilu(x, np.asarray(k, dtype=np.int64) if k else None, upper=1, name=name)


def tril(x, k=0, name=None):
    """The lower triangle of the last two dims, up to diagonal k; the rest zero (ONNX Trilu)."""
    return ops.Trilu(x, np.asarray(k, dtype=np.int64) if k else None, upper=0, name=name)


def one_hot(indices, depth, values=(0.0, 1.0), axis=-1, name=None):
    """One-hot along a new axis: values = (off, on), float32 unless given as an array."""
    if not isinstance(values, (Expr, np.ndarray)):
        values = np.asarray(values, dtype=np.float32)
    depth = np.asarray(depth, dtype=np.int64) if not isinstance(depth, Expr) else depth
    return ops.OneHot(indices, depth, values, axis=axis, name=name)


def eye_like(x, k=0, dtype=None, name=None):
    """A 2-D tensor of x's shape with ones on diagonal k (ONNX EyeLike)."""
    return ops.EyeLike(x, k=k, dtype=dtype, name=name)


def depth_to_space(x, blocksize, mode="DCR", name=None):
    """Moves channel blocks into blocksize x blocksize spatial blocks (ONNX DepthToSpace)."""
    return ops.DepthToSpace(x, blocksize=blocksize, mode=mode, name=name)


def space_to_depth(x, blocksize, mode="DCR", name=None):
    """Moves blocksize x blocksize spatial blocks into channels (ONNX SpaceToDepth; mode
    "DCR" or, from opset 28, "CRD")."""
    return ops.SpaceToDepth(x, blocksize=blocksize, mode=mode, name=name)


def compress(condition, x, axis=None, name=None):
    """numpy.compress: the slices of x (along axis; flattened when None) where condition is
    true. The output size is known at run time."""
    return ops.Compress(x, condition, axis=axis, name=name)


def topk(x, k, axis=-1, largest=True, sorted=True, name=None):  # noqa: A002
    """(values, indices) of the k largest (or smallest) along axis."""
    k_value = k if isinstance(k, Expr) else [k] if isinstance(k, Dim) else np.asarray([int(k)], np.int64)
    return ops.TopK(x, k_value, axis=axis, largest=int(bool(largest)), sorted=int(bool(sorted)),
                    name=name)


def unique(x, axis=None, sorted=True, return_all=False, name=None):  # noqa: A002
    """Unique values (flattened when axis is None); return_all=True also returns indices,
    inverse indices and counts."""
    return ops.Unique(x, axis=axis, sorted=int(bool(sorted)), outputs=4 if return_all else 1,
                      name=name)


# ---- sequences (ONNX sequence values; a compiled program takes and returns them as lists) ----


def sequence_empty(dtype="float32", name=None):
    """An empty ONNX sequence of `dtype` tensors."""
    return ops.SequenceEmpty(dtype=dtype, name=name)


def sequence_construct(*tensors, name=None):
    """A sequence of the given tensors (one dtype, any shapes)."""
    return ops.SequenceConstruct(*tensors, name=name)


def sequence_insert(sequence, tensor, position=None, name=None):
    """A new sequence with `tensor` inserted before `position` (default: at the end;
    negative counts from the back)."""
    return ops.SequenceInsert(sequence, tensor, position, name=name)


def sequence_erase(sequence, position=None, name=None):
    """A new sequence without the element at `position` (default: the last)."""
    return ops.SequenceErase(sequence, position, name=name)


def sequence_at(sequence, position, name=None):
    """The element at `position` (negative counts from the back)."""
    return ops.SequenceAt(sequence, position, name=name)


def sequence_length(sequence, name=None):
    """The number of elements, an int64 scalar."""
    return ops.SequenceLength(sequence, name=name)


def split_to_sequence(x, split=None, axis=0, keepdims=1, name=None):
    """ONNX SplitToSequence: x cut along `axis` into pieces of `split` (a chunk size, or one
    size per piece), or of 1 (then keepdims=0 drops the axis)."""
    return ops.SplitToSequence(x, split, axis=axis, keepdims=keepdims, name=name)


def concat_from_sequence(sequence, axis, new_axis=0, name=None):
    """ONNX ConcatFromSequence: the elements joined along `axis` (new_axis=1 stacks them on a
    new axis)."""
    return ops.ConcatFromSequence(sequence, axis=axis, new_axis=new_axis, name=name)


# ---- object detection ------------------------------------------------------------------------


def non_max_suppression(boxes, scores, max_output_boxes_per_class=None, iou_threshold=None,
                        score_threshold=None, center_point_box=0, name=None):
    """ONNX NonMaxSuppression: boxes [B, S, 4] (corners y1, x1, y2, x2, or x_center, y_center,
    width, height with center_point_box=1), scores [B, C, S]; per batch and class, boxes by
    descending score (ties: lower index first) kept unless their IoU with a kept box exceeds
    iou_threshold. Returns int64 [selected, 3] rows (batch, class, box), the count known at
    run time. Without max_output_boxes_per_class nothing is selected, as in ONNX."""
    return ops.NonMaxSuppression(boxes, scores, max_output_boxes_per_class, iou_threshold,
                                 score_threshold, center_point_box=center_point_box, name=name)


def roi_align(x, rois, batch_indices, output_height=1, output_width=1, sampling_ratio=0,
              spatial_scale=1.0, mode="avg", coordinate_transformation_mode="half_pixel",
              name=None):
    """ONNX RoiAlign: x [N, C, H, W], rois [R, 4] (x1, y1, x2, y2 in input coordinates before
    spatial_scale), batch_indices int64 [R] -> [R, C, output_height, output_width]; each bin
    averages (mode "max": takes the maximum of) bilinear samples, sampling_ratio per bin side
    or adaptive (0)."""
    return ops.RoiAlign(x, rois, batch_indices, output_height=output_height,
                        output_width=output_width, sampling_ratio=sampling_ratio,
                        spatial_scale=spatial_scale, mode=mode,
                        coordinate_transformation_mode=coordinate_transformation_mode, name=name)


# ---- control flow ----------------------------------------------------------------------------


def cond(predicate, then_fn, else_fn, name=None):
    """If: runs then_fn() or else_fn() (traced once each; they return an expression or a
    tuple of them, of the same count, dtypes and ranks) by a bool scalar predicate."""
    from ._trace import trace
    then_body = trace(then_fn, [])
    else_body = trace(else_fn, [])
    if len(then_body.outputs) != len(else_body.outputs):
        raise ValueError(f"cond: then_fn returns {len(then_body.outputs)} values but else_fn "
                         f"returns {len(else_body.outputs)}")
    count = len(then_body.outputs)
    return apply("If", [predicate], "c",
                 {"then_branch": ("graph", then_body), "else_branch": ("graph", else_body)},
                 count, name)


def loop(body, initial, max_trip_count=None, condition=None, scan_outputs=0, name=None):
    """Loop: state = initial; for i in range(max_trip_count) while condition:
    (condition, *state, *scans) = body(i, condition, *state). Returns the final state values
    followed by the scan outputs (stacked per iteration). body is traced once."""
    from ._trace import trace
    initial = [v if isinstance(v, Expr) else constant(v) for v in initial]
    params = [("int64", []), ("bool", [])] + [(v.dtype, list(v.shape)) for v in initial]
    traced = trace(body, params)
    expected = 1 + len(initial) + scan_outputs
    if len(traced.outputs) != expected:
        raise ValueError(f"loop body returns {len(traced.outputs)} values; expected {expected} "
                         f"(condition, {len(initial)} state values, {scan_outputs} scans)")
    inputs = [None if max_trip_count is None else np.asarray(max_trip_count, dtype=np.int64),
              np.asarray(True) if condition is None else condition] + initial
    outputs = apply("Loop", inputs, "ic" + "a" * len(initial), {"body": ("graph", traced)},
                    len(initial) + scan_outputs, name)
    return outputs


# ---- quantization --------------------------------------------------------------------------


def quantize_linear(x, scale, zero_point=None, axis=1, block_size=0, output_dtype=None,
                    name=None):
    """ONNX QuantizeLinear: saturate(round_half_even(x / scale) + zero_point). scale (and
    zero_point, whose dtype is the result's: int8, uint8, int16 or uint16; uint8 without one)
    is a scalar, a 1-D per-`axis` vector, or blocked along `axis` in blocks of `block_size`."""
    return ops.QuantizeLinear(x, scale, zero_point, axis=axis,
                              block_size=block_size or None, output_dtype=output_dtype,
                              name=name)


def dequantize_linear(x, scale, zero_point=None, axis=1, block_size=0, name=None):
    """ONNX DequantizeLinear: (x - zero_point) * scale, with QuantizeLinear's granularities;
    the result has scale's dtype."""
    return ops.DequantizeLinear(x, scale, zero_point, axis=axis, block_size=block_size or None,
                                name=name)


def dynamic_quantize_linear(x, name=None):
    """ONNX DynamicQuantizeLinear of a float32 x: (y uint8, scale, zero_point) from the range
    of x and 0."""
    return ops.DynamicQuantizeLinear(x, name=name)


def matmul_integer(a, b, a_zero_point=None, b_zero_point=None, name=None):
    """int8/uint8 matmul with int32 results: (a - a_zero_point) @ (b - b_zero_point); zero
    points per tensor, per row of a / per column of b."""
    return ops.MatMulInteger(a, b, a_zero_point, b_zero_point, name=name)


def qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point,
                   name=None):
    """Quantized matmul: the int32 product of the dequantized operands requantized with
    y_scale and y_zero_point (ONNX QLinearMatMul)."""
    return ops.QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                             y_zero_point, name=name)


def conv_integer(x, w, x_zero_point=None, w_zero_point=None, strides=None, padding=None,
                 dilations=None, groups=1, auto_pad=None, name=None):
    """int8/uint8 convolution with int32 results (ONNX ConvInteger); arguments as conv()."""
    n = _spatial_count(x, w)
    return ops.ConvInteger(x, w, x_zero_point, w_zero_point,
                           strides=_spatial_ints(strides, n, "strides"), pads=_pads(padding, n),
                           dilations=_spatial_ints(dilations, n, "dilations"), group=groups,
                           auto_pad=auto_pad, name=name)


def qlinear_conv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
                 b=None, strides=None, padding=None, dilations=None, groups=1, auto_pad=None,
                 name=None):
    """Quantized convolution with an int32 bias, requantized to y_zero_point's dtype (ONNX
    QLinearConv); window arguments as conv()."""
    n = _spatial_count(x, w)
    return ops.QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
                           y_zero_point, b, strides=_spatial_ints(strides, n, "strides"),
                           pads=_pads(padding, n),
                           dilations=_spatial_ints(dilations, n, "dilations"), group=groups,
                           auto_pad=auto_pad, name=name)


# The numpy-like function for each ONNX op (a test checks every op of ops.def is covered).
NUMPY_NAMES = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Pow": "power",
    "Mod": "remainder", "BitShift": "bitwise_left_shift", "And": "logical_and",
    "Or": "logical_or", "Xor": "logical_xor", "Equal": "equal", "Less": "less",
    "LessOrEqual": "less_equal", "Greater": "greater", "GreaterOrEqual": "greater_equal",
    "Max": "maximum", "Min": "minimum", "Sum": "add_n", "Mean": "mean_n", "Where": "where",
    "PRelu": "prelu", "Relu": "relu", "LeakyRelu": "leaky_relu", "Elu": "elu", "Selu": "selu",
    "Celu": "celu", "ThresholdedRelu": "thresholded_relu", "Gelu": "gelu",
    "Sigmoid": "sigmoid", "HardSigmoid": "hard_sigmoid", "HardSwish": "hard_swish",
    "Softsign": "softsign", "Softplus": "softplus", "Shrink": "shrink", "Tanh": "tanh",
    "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Reciprocal": "reciprocal", "Neg": "negative",
    "Abs": "absolute", "Erf": "erf", "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "arcsin",
    "Acos": "arccos", "Atan": "arctan", "Sinh": "sinh", "Cosh": "cosh", "Asinh": "arcsinh",
    "Acosh": "arccosh", "Atanh": "arctanh", "Floor": "floor", "Ceil": "ceil", "Round": "round",
    "Not": "logical_not", "Sign": "sign", "Clip": "clip", "IsNaN": "isnan", "IsInf": "isinf",
    "Cast": "cast", "CastLike": "cast_like", "Dropout": "dropout", "Identity": "identity",
    "ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
    "ReduceProd": "prod", "ReduceL1": "reduce_l1", "ReduceL2": "reduce_l2",
    "ReduceSumSquare": "reduce_sum_square", "ReduceLogSum": "reduce_log_sum",
    "ReduceLogSumExp": "logsumexp", "ArgMax": "argmax", "ArgMin": "argmin",
    "Softmax": "softmax", "LogSoftmax": "log_softmax", "Hardmax": "hardmax", "CumSum": "cumsum",
    "NegativeLogLikelihoodLoss": "nll_loss", "SoftmaxCrossEntropyLoss": "softmax_cross_entropy",
    "LayerNormalization": "layer_norm", "BatchNormalization": "batch_norm",
    "InstanceNormalization": "instance_norm", "LRN": "local_response_norm",
    "MatMul": "matmul", "Gemm": "gemm",
    "Einsum": "einsum", "Conv": "conv", "ConvTranspose": "conv_transpose",
    "MaxPool": "max_pool", "AveragePool": "avg_pool", "GlobalAveragePool": "global_avg_pool",
    "GlobalMaxPool": "global_max_pool", "Reshape": "reshape", "Flatten": "flatten",
    "Transpose": "transpose", "Squeeze": "squeeze", "Unsqueeze": "expand_dims",
    "Concat": "concat", "Split": "split", "Slice": "slice", "Gather": "gather",
    "GatherElements": "gather_elements", "GatherND": "gather_nd",
    "ScatterElements": "scatter_elements", "ScatterND": "scatter_nd", "Expand": "expand",
    "Tile": "tile", "Pad": "pad", "Shape": "shape", "Size": "size", "ConstantOfShape": "full",
    "Range": "arange", "Constant": "constant", "Resize": "resize", "Trilu": "triu",
    "OneHot": "one_hot", "EyeLike": "eye_like", "DepthToSpace": "depth_to_space",
    "SpaceToDepth": "space_to_depth", "Compress": "compress", "NonZero": "nonzero",
    "TopK": "topk", "Unique": "unique", "NonMaxSuppression": "non_max_suppression",
    "RoiAlign": "roi_align", "If": "cond", "Loop": "loop",
    "SequenceEmpty": "sequence_empty", "SequenceConstruct": "sequence_construct",
    "SequenceInsert": "sequence_insert", "SequenceErase": "sequence_erase",
    "SequenceAt": "sequence_at", "SequenceLength": "sequence_length",
    "SplitToSequence": "split_to_sequence", "ConcatFromSequence": "concat_from_sequence",
    "QuantizeLinear": "quantize_linear", "DequantizeLinear": "dequantize_linear",
    "DynamicQuantizeLinear": "dynamic_quantize_linear", "MatMulInteger": "matmul_integer",
    "QLinearMatMul": "qlinear_matmul", "ConvInteger": "conv_integer",
    "QLinearConv": "qlinear_conv",
}


# Names that Expr exposes as methods: x.sum(axis=1), x.softmax(), ...
METHODS = {
    "sum", "mean", "max", "min", "prod", "argmax", "argmin", "softmax", "log_softmax", "relu",
    "sigmoid", "tanh", "exp", "log", "sqrt", "clip", "squeeze", "expand_dims", "cumsum", "round",
    "floor", "ceil", "matmul", "gelu", "cast", "expand", "tile", "gather", "take",
}


__all__ = sorted(set([
    name for name, value in list(globals().items())
    if callable(value) and not name.startswith("_") and getattr(value, "__module__", None) == __name__
    and name not in ("make_builder", "as_expr")
] + ["ops", "op", "abs", "round", "astype", "unsqueeze", "concatenate", "take", "take_along_axis",
     "broadcast_to", "logsumexp"]))
