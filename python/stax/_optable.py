"""The schema of every op in include/stax/ops.def, for the Python builders.

One line per op: ``Name: inputs | attributes | outputs``.

* inputs: ``name:role`` with a suffix ``?`` (optional) or ``*`` (variadic). Roles say how a
  Python value (number, list, numpy array) given for the input becomes a constant:
    x  data: a Python number or list takes the dtype of the op's other data inputs
       (``x + 1`` stays float32); numpy arrays keep their dtype
    c  a condition (bool)
    i  integers (int64): axes, shapes, indices, pads, counts; lists may hold symbolic dims,
       computed at run time from the inputs' shapes
    f  float32 (Resize roi and scales)
    a  any: a Python value becomes a numpy array with numpy's dtype (float64 -> float32)
* attributes: ``name:KIND`` with KIND one of INT, FLOAT, STRING, INTS, FLOATS, STRINGS,
  TENSOR, GRAPH (src/ir/op_attrs.def; a test checks the two agree), or DTYPE: an INT holding an
  ONNX element type, given in Python as a dtype name.
* outputs: ``n`` or ``min-max`` (``min-*``: as many as asked for).
"""

SCHEMA_TEXT = """
Add: a:x b:x | | 1
Sub: a:x b:x | | 1
Mul: a:x b:x | | 1
Div: a:x b:x | | 1
Pow: x:x y:x | | 1
Mod: a:x b:x | fmod:INT | 1
BitShift: x:x y:x | direction:STRING | 1
And: a:c b:c | | 1
Or: a:c b:c | | 1
Xor: a:c b:c | | 1
Equal: a:x b:x | | 1
Less: a:x b:x | | 1
LessOrEqual: a:x b:x | | 1
Greater: a:x b:x | | 1
GreaterOrEqual: a:x b:x | | 1
Max: inputs:x* | | 1
Min: inputs:x* | | 1
Sum: inputs:x* | | 1
Mean: inputs:x* | | 1
Where: condition:c x:x y:x | | 1
PRelu: x:x slope:x | | 1
Relu: x:x | | 1
LeakyRelu: x:x | alpha:FLOAT | 1
Elu: x:x | alpha:FLOAT | 1
Selu: x:x | alpha:FLOAT gamma:FLOAT | 1
Celu: x:x | alpha:FLOAT | 1
ThresholdedRelu: x:x | alpha:FLOAT | 1
Gelu: x:x | approximate:STRING | 1
Sigmoid: x:x | | 1
HardSigmoid: x:x | alpha:FLOAT beta:FLOAT | 1
HardSwish: x:x | | 1
Softsign: x:x | | 1
Softplus: x:x | | 1
Shrink: x:x | bias:FLOAT lambd:FLOAT | 1
Tanh: x:x | | 1
Exp: x:x | | 1
Log: x:x | | 1
Sqrt: x:x | | 1
Reciprocal: x:x | | 1
Neg: x:x | | 1
Abs: x:x | | 1
Erf: x:x | | 1
Sin: x:x | | 1
Cos: x:x | | 1
Tan: x:x | | 1
Asin: x:x | | 1
Acos: x:x | | 1
Atan: x:x | | 1
Sinh: x:x | | 1
Cosh: x:x | | 1
Asinh: x:x | | 1
Acosh: x:x | | 1
Atanh: x:x | | 1
Floor: x:x | | 1
Ceil: x:x | | 1
Round: x:x | | 1
Not: x:c | | 1
Sign: x:x | | 1
Clip: x:x min:x? max:x? | min:FLOAT max:FLOAT | 1
IsNaN: x:x | | 1
IsInf: x:x | detect_negative:INT detect_positive:INT | 1
Cast: x:x | to:DTYPE saturate:INT round_mode:STRING | 1
CastLike: x:a target_type:x | saturate:INT round_mode:STRING | 1
Dropout: data:x ratio:f? training_mode:c? | seed:INT ratio:FLOAT | 1-2
Identity: x:x | | 1
ReduceSum: data:x axes:i? | axes:INTS keepdims:INT noop_with_empty_axes:INT | 1
ReduceMean: data:x axes:i? | axes:INTS keepdims:INT noop_with_empty_axes:INT | 1
ReduceMax: data:x axes:i? | axes:INTS keepdims:INT noop_with_empty_axes:INT | 1
ReduceMin: data:x axes:i? | axes:INTS keepdims:INT noop_with_empty_axes:INT | 1
ReduceProd: data:x axes:i? | axes:INTS keepdims:INT noop_with_empty_axes:INT | 1
ReduceL1: data:x axes:i? | axes:INTS keepdims:INT noop_with_empty_axes:INT | 1
ReduceL2: data:x axes:i? | axes:INTS keepdims:INT noop_with_empty_axes:INT | 1
ReduceSumSquare: data:x axes:i? | axes:INTS keepdims:INT noop_with_empty_axes:INT | 1
ReduceLogSum: data:x axes:i? | axes:INTS keepdims:INT noop_with_empty_axes:INT | 1
ReduceLogSumExp: data:x axes:i? | axes:INTS keepdims:INT noop_with_empty_axes:INT | 1
ArgMax: data:x | axis:INT keepdims:INT select_last_index:INT | 1
ArgMin: data:x | axis:INT keepdims:INT select_last_index:INT | 1
Softmax: x:x | axis:INT | 1
LogSoftmax: x:x | axis:INT | 1
Hardmax: x:x | axis:INT | 1
CumSum: x:x axis:i | exclusive:INT reverse:INT | 1
NegativeLogLikelihoodLoss: input:x target:i weight:x? | ignore_index:INT reduction:STRING | 1
SoftmaxCrossEntropyLoss: scores:x labels:i weights:x? | ignore_index:INT reduction:STRING | 1-2
LayerNormalization: x:x scale:x bias:x? | axis:INT epsilon:FLOAT stash_type:INT | 1-3
BatchNormalization: x:x scale:x bias:x mean:x var:x | epsilon:FLOAT momentum:FLOAT training_mode:INT | 1-3
InstanceNormalization: x:x scale:x bias:x | epsilon:FLOAT | 1
LRN: x:x | alpha:FLOAT beta:FLOAT bias:FLOAT size:INT | 1
MatMul: a:x b:x | | 1
Gemm: a:x b:x c:x? | alpha:FLOAT beta:FLOAT transA:INT transB:INT | 1
Einsum: inputs:x* | equation:STRING | 1
Conv: x:x w:x b:x? | auto_pad:STRING dilations:INTS group:INT kernel_shape:INTS pads:INTS strides:INTS | 1
ConvTranspose: x:x w:x b:x? | auto_pad:STRING dilations:INTS group:INT kernel_shape:INTS output_padding:INTS output_shape:INTS pads:INTS strides:INTS | 1
MaxPool: x:x | auto_pad:STRING ceil_mode:INT dilations:INTS kernel_shape:INTS pads:INTS storage_order:INT strides:INTS | 1-2
AveragePool: x:x | auto_pad:STRING ceil_mode:INT count_include_pad:INT dilations:INTS kernel_shape:INTS pads:INTS strides:INTS | 1
GlobalAveragePool: x:x | | 1
GlobalMaxPool: x:x | | 1
QuantizeLinear: x:a y_scale:a y_zero_point:a? | axis:INT saturate:INT block_size:INT output_dtype:DTYPE precision:DTYPE | 1
DequantizeLinear: x:a x_scale:a x_zero_point:a? | axis:INT block_size:INT output_dtype:DTYPE | 1
DynamicQuantizeLinear: x:x | | 3
MatMulInteger: a:a b:a a_zero_point:a? b_zero_point:a? | | 1
QLinearMatMul: a:a a_scale:a a_zero_point:a b:a b_scale:a b_zero_point:a y_scale:a y_zero_point:a | | 1
ConvInteger: x:a w:a x_zero_point:a? w_zero_point:a? | auto_pad:STRING dilations:INTS group:INT kernel_shape:INTS pads:INTS strides:INTS | 1
QLinearConv: x:a x_scale:a x_zero_point:a w:a w_scale:a w_zero_point:a y_scale:a y_zero_point:a b:a? | auto_pad:STRING dilations:INTS group:INT kernel_shape:INTS pads:INTS strides:INTS | 1
Reshape: data:x shape:i | allowzero:INT | 1
Flatten: x:x | axis:INT | 1
Transpose: x:x | perm:INTS | 1
Squeeze: data:x axes:i? | axes:INTS | 1
Unsqueeze: data:x axes:i? | axes:INTS | 1
Concat: inputs:x* | axis:INT | 1
Split: x:x split:i? | axis:INT split:INTS num_outputs:INT | 1-*
Slice: data:x starts:i ends:i axes:i? steps:i? | | 1
Gather: data:x indices:i | axis:INT | 1
GatherElements: data:x indices:i | axis:INT | 1
GatherND: data:x indices:i | batch_dims:INT | 1
ScatterElements: data:x indices:i updates:x | axis:INT reduction:STRING | 1
ScatterND: data:x indices:i updates:x | reduction:STRING | 1
Expand: x:x shape:i | | 1
Tile: x:x repeats:i | | 1
Pad: data:x pads:i constant_value:x? axes:i? | mode:STRING | 1
Shape: data:x | start:INT end:INT | 1
Size: data:x | | 1
ConstantOfShape: shape:i | value:TENSOR | 1
Range: start:x limit:x delta:x | stash_type:INT | 1
Constant: | value:TENSOR value_float:FLOAT value_floats:FLOATS value_int:INT value_ints:INTS value_string:STRING value_strings:STRINGS | 1
Resize: x:x roi:f? scales:f? sizes:i? | antialias:INT axes:INTS coordinate_transformation_mode:STRING cubic_coeff_a:FLOAT exclude_outside:INT extrapolation_value:FLOAT keep_aspect_ratio_policy:STRING mode:STRING nearest_mode:STRING | 1
Trilu: x:x k:i? | upper:INT | 1
OneHot: indices:i depth:i values:a | axis:INT | 1
EyeLike: x:x | dtype:DTYPE k:INT | 1
DepthToSpace: x:x | blocksize:INT mode:STRING | 1
SpaceToDepth: x:x | blocksize:INT mode:STRING | 1
Compress: x:x condition:c | axis:INT | 1
NonZero: x:x | | 1
TopK: x:x k:i | axis:INT largest:INT sorted:INT | 2
Unique: x:x | axis:INT sorted:INT | 1-4
NonMaxSuppression: boxes:x scores:x max_output_boxes_per_class:i? iou_threshold:f? score_threshold:f? | center_point_box:INT | 1
RoiAlign: x:x rois:x batch_indices:i | coordinate_transformation_mode:STRING mode:STRING output_height:INT output_width:INT sampling_ratio:INT spatial_scale:FLOAT | 1
SequenceEmpty: | dtype:DTYPE | 1
SequenceConstruct: inputs:x* | | 1
SequenceInsert: input_sequence:a tensor:x position:i? | | 1
SequenceErase: input_sequence:a position:i? | | 1
SequenceAt: input_sequence:a position:i | | 1
SequenceLength: input_sequence:a | | 1
SplitToSequence: input:x split:i? | axis:INT keepdims:INT | 1
ConcatFromSequence: input_sequence:a | axis:INT new_axis:INT | 1
If: cond:c | then_branch:GRAPH else_branch:GRAPH | 1-*
Loop: max_trip_count:i? cond:c? initial:a* | body:GRAPH | 1-*
"""


class InputSpec:
    __slots__ = ("name", "role", "optional", "variadic")

    def __init__(self, text):
        name, role = text.split(":")
        self.optional = role.endswith("?")
        self.variadic = role.endswith("*")
        self.role = role.rstrip("?*")
        self.name = name
        if self.role not in ("x", "c", "i", "f", "a"):
            raise ValueError(f"bad input role in {text!r}")


class OpSchema:
    __slots__ = ("name", "inputs", "attrs", "min_outputs", "max_outputs")

    def __init__(self, name, inputs, attrs, outputs):
        self.name = name
        self.inputs = inputs
        self.attrs = attrs  # {name: KIND}
        if "-" in outputs:
            low, high = outputs.split("-")
            self.min_outputs = int(low)
            self.max_outputs = None if high == "*" else int(high)
        else:
            self.min_outputs = self.max_outputs = int(outputs)


def _parse():
    table = {}
    for line in SCHEMA_TEXT.strip().splitlines():
        name, rest = line.split(":", 1)
        inputs, attrs, outputs = (part.strip() for part in rest.split("|"))
        table[name] = OpSchema(
            name,
            [InputSpec(t) for t in inputs.split()],
            dict(t.split(":") for t in attrs.split()),
            outputs,
        )
    return table


SCHEMAS = _parse()
