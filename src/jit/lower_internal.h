/* Shared state of the lowering files:
 *   lower.c             the entry point: checks the group, classifies its nodes, dispatches;
 *                       values as expressions (loads, memo, spaces)
 *   lower_ops.c         the semantics of every fusible elementwise op, as kernel IR
 *   lower_elementwise.c elementwise groups: broadcasting, dim collapsing, loops
 *   lower_rows.c        row kernels: reductions over the last axis with their neighbours
 *   lower_matmul.c      MatMul / Gemm with an elementwise epilogue
 *   lower_matmul_symbolic.c  batched MatMul over open dims (symbolic groups: attention)
 *   lower_sym.c         symbolic extents: a constant or a constant times a parameter
 *   lower_conv.c        Conv (N-D, groups, pads, strides, dilations, bias) with an elementwise
 *                       epilogue
 *   lower_conv_symbolic.c  Conv over open image sizes (symbolic groups)
 *   lower_pool.c        MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool with an
 *                       elementwise epilogue
 *
 * Values are evaluated lazily, as expressions, at the current point of the iteration space:
 * `forms[e]` is the affine index (over the kernel's loops) of iteration dim e. An external
 * value is a load whose index is sum(stride[d] * forms[e(d)]) over its non-broadcast dims
 * (numpy right alignment); a node's output is its op applied to its inputs' expressions; a
 * value a row kernel, matmul or conv has already computed into a local is that local. Expressions
 * are memoized per value for the current point, which keeps shared subexpressions shared (the
 * printed IR and the compile stay linear in the group's size); every change of the point
 * bumps the memo stamp. */
#ifndef STAX_JIT_LOWER_INTERNAL_H_
#define STAX_JIT_LOWER_INTERNAL_H_

#include "jit/lower.h"
#include "kernels/gemm.h"

/* Where a value lives relative to the iteration space of a row kernel: FULL values align to
 * all its dims; ROW values (the outputs of a reduction without keepdims and what is computed
 * from them) align to the dims before the reduced one. Other kernels only use FULL. */
typedef enum lower_space_e { LOWER_FULL = 0, LOWER_ROW = 1 } lower_space_t;

typedef struct lower_t {
  const stax_jit_group_t* group;
  const stax_jit_lower_options_t* options;
  stax_kir_kernel_t* kernel;
  stax_allocator_t allocator;

  /* Per value. */
  int32_t* buffer;                 /* kernel buffer of an input/output, -1 for temporaries */
  int32_t* producer;               /* producing node, -1 for external inputs */
  int32_t* producer_slot;          /* which output of the producer */
  int32_t* uses;                   /* how many node inputs read it */
  lower_space_t* space;            /* row kernels: the value's space */
  const stax_kir_expr_t** fixed;   /* a value already computed (a local's read), or NULL */
  const stax_kir_expr_t** memo[2]; /* per space */
  uint32_t* memo_stamp[2];
  uint32_t stamp;

  /* The iteration space at the current point. */
  int32_t rank;
  int64_t dims[STAX_MAX_RANK];
  stax_kir_index_t forms[STAX_MAX_RANK];

  /* Symbolic groups: iteration dim e is kernel parameter dim_params[e] (-1: fixed). */
  int32_t dim_params[STAX_MAX_RANK];

  /* Per node: data a kernel-specific lowering attaches (row kernels' locals). */
  void** node_data;
  int32_t vector_lanes_f32; /* lanes of a native float32 vector */
} lower_t;

/* ---- helpers (lower.c) -------------------------------------------------------------------- */

/* A value's name for messages ("v3" when unnamed). */
const char* lower_value_name(const lower_t* L, int32_t value);
const stax_jit_value_t* lower_value(const lower_t* L, int32_t value);
/* UNIMPLEMENTED naming the group and the reason. */
STAX_MUST_USE stax_status_t lower_refuse(const lower_t* L, const char* fmt, ...) STAX_PRINTF(2, 3);
/* The value's expression at the current point, in the given space. float16/bfloat16 values
 * come as float32 (the runtime computes them so): loads are widened, and each node's result
 * is rounded to its value's 16-bit dtype and widened again, so a fused chain rounds where the
 * interpreter does. */
const stax_kir_expr_t* lower_value_expr(lower_t* L, int32_t value, lower_space_t space);
/* The dtype a value's expression has: float32 for float16/bfloat16, else its own. */
stax_dtype_t lower_compute_dtype(stax_dtype_t dtype);
/* `expr` converted to a value of `dtype`, as an expression of its compute dtype: a cast, or
 * for float16/bfloat16 the rounding to it and the widening back. */
const stax_kir_expr_t* lower_round_to(lower_t* L, stax_dtype_t dtype, const stax_kir_expr_t* expr);
/* Starts a new point (the forms changed): forgets memoized expressions. */
void lower_new_point(lower_t* L);
/* True when `value` broadcasts into dims[offset .. offset+count) of the iteration space. */
bool lower_value_fits(const lower_t* L, int32_t value, int32_t offset, int32_t count);
/* Rows-generic groups: true when `value` lines up with the row dim of a space of that rank (a
 * rows value spans it, any other value broadcasts over it); always true otherwise. */
bool lower_rows_value_fits(const lower_t* L, int32_t value, int32_t space_rank);
/* The index of `value`'s element at the current point (right-aligned to dims
 * [0, space_rank)). */
stax_kir_index_t lower_value_index(lower_t* L, int32_t value, int32_t space_rank);
/* Stores `value` (a group output) at the current point into its buffer; its index is
 * right-aligned to iteration dims [0, space_rank). */
void lower_store_value(lower_t* L, stax_kir_block_t* block, int32_t value, lower_space_t space,
                       int32_t space_rank);
/* Symbolic groups: whether dim d of `value` varies over the class. */
bool lower_dim_open(const lower_t* L, int32_t value, int32_t d);
/* Symbolic groups: gives iteration dims [0, space_rank) their parameters (read from a buffer
 * value of that rank whose dim is open there) and ties every buffer's open dims to them
 * (right-aligned; values in the ROW space of a row kernel align to [0, space_rank - 1)).
 * UNIMPLEMENTED when a value is open where the space is not. Values in `skip` (a matmul's
 * operands) are neither read nor tied. */
/* The loop order of a symbolic nest over the space's first `count` dims: the example's sizes
 * say nothing about a call's, so the outermost (parallel) loop is the largest fixed dim
 * (attention's heads: the batch may be 1), else the first open one; then the rest in order.
 * Writes `order` and returns how many it wrote (count). */
int32_t lower_symbolic_order(const lower_t* L, int32_t count, int32_t* order);
STAX_MUST_USE stax_status_t lower_symbolic_space(lower_t* L, int32_t space_rank,
                                                 const int32_t* skip, int32_t skip_count);
/* ---- symbolic extents (lower_sym.c) -------------------------------------------------------- */

/* c * parameter p, or the constant c when p < 0. */
typedef struct lower_sym_t {
  int64_t c;
  int32_t p;
} lower_sym_t;

lower_sym_t lower_sym_const(int64_t c);
lower_sym_t lower_sym_param(int32_t p);
lower_sym_t lower_sym_mul(stax_kir_kernel_t* k, lower_sym_t a, lower_sym_t b);
/* A parameter equal to s (c folded in), for loop extents and conditions; -1 for a constant. */
int32_t lower_sym_plain(stax_kir_kernel_t* k, const char* name, lower_sym_t s);
/* mul0 * floor((x + add0) / div0) + mul1 * floor((x + add1) / div1) + offset (div1 0: no
 * second term); a constant for a constant x. */
lower_sym_t lower_sym_derive(stax_kir_kernel_t* k, const char* name, lower_sym_t x, int64_t mul0,
                             int64_t add0, int64_t div0, int64_t mul1, int64_t add1,
                             int64_t div1, int64_t offset);
/* s at the example (the buffers' own dims and strides). */
int64_t lower_sym_example(const stax_kir_kernel_t* k, lower_sym_t s);
/* x += coefficient * loop */
void lower_sym_index_term(stax_kir_kernel_t* k, stax_kir_index_t* x, int32_t loop,
                          lower_sym_t coefficient);
/* x += s */
void lower_sym_index_add(stax_kir_kernel_t* k, stax_kir_index_t* x, lower_sym_t s);
/* x += other * s */
void lower_sym_index_add_scaled(stax_kir_kernel_t* k, stax_kir_index_t* x,
                                const stax_kir_index_t* other, lower_sym_t s);
/* A loop named <base><n> of `extent` iterations. */
stax_kir_loop_t* lower_sym_loop(stax_kir_kernel_t* k, stax_kir_block_t* block, const char* base,
                                lower_sym_t extent);
/* Whether lo <= s <= hi can hold at all. */
bool lower_sym_possible(lower_sym_t s, int64_t lo, int64_t hi);
/* Restricts the stage added last to lo <= s <= hi (nothing for a fixed s: callers add only
 * stages that are possible). */
void lower_sym_stage_when(stax_kir_kernel_t* k, lower_sym_t s, int64_t lo, int64_t hi);

/* ---- Conv (lower_conv.c, lower_conv_symbolic.c) -------------------------------------------- */

/* A Conv node's operands and window, checked: X [N, C, D..], W [M, C/G, K..], optional B [M],
 * Y [N, M, O..], G groups; the window's sizes and pads are the example's (the generic
 * kernel's rules, so both tiers agree). Also sets the iteration space to Y's and checks that
 * the group's other values fit it. */
typedef enum lower_window_op_e {
  LOWER_WINDOW_CONV,    /* sum of products with W */
  LOWER_WINDOW_MAX,     /* MaxPool: the largest tap (the generic kernel's comparisons) */
  LOWER_WINDOW_AVERAGE, /* AveragePool over a fixed count of taps: float64 sum / divisor */
} lower_window_op_t;

typedef struct lower_conv_geometry_t {
  int32_t node;
  const char* name; /* the node's name, for messages */
  int32_t x, w, bias, out; /* w and bias -1 for pools */
  int32_t spatial;
  int64_t batch, channels, out_channels, group, cg, mg;
  stax_window_t window;
  /* Pools as depthwise windows (group = channels, cg = mg = 1, no W): the op, and the
   * average's divisor. */
  lower_window_op_t op;
  double divisor;
  /* An average whose tap count varies by position (count_include_pad 0 with pads, or
   * ceil_mode): the divisor is the window's sum over a mask of the padded plane (1 inside the
   * input, 0 in the pads and in ceil_mode's overhang past the end pad). count_pads: the pads
   * count too (count_include_pad 1), only the overhang is 0. */
  bool count_mask, count_pads;
} lower_conv_geometry_t;

STAX_MUST_USE stax_status_t lower_conv_geometry(lower_t* L, int32_t node,
                                                lower_conv_geometry_t* out);
/* A Conv register tile: `rows` output channels x `lanes` positions of the innermost output
 * dim (one vector loop holding `rows` accumulators), its reduction loops over (input channel,
 * kernel taps) reading `source` (X, or its padded copy) with strides `src_strides` over
 * [N, C, D..] (the innermost a constant), the phase split's taps when `phases` > 1, and the
 * epilogue (+ B, the group's elementwise ops) stored at the tile's output points. The forms
 * give the tile's batch, group, first channel within the group, outer output coordinates
 * and first position. */
typedef struct lower_conv_tile_t {
  const lower_conv_geometry_t* g;
  int32_t source;
  lower_sym_t src_strides[STAX_MAX_RANK];
  int64_t phases;
  lower_sym_t phase_length;
  stax_kir_index_t batch, group, channels, positions;
  stax_kir_index_t outer[STAX_MAX_RANK];
  int32_t rows, lanes;
  int32_t tile; /* numbers the tile's locals */
  int32_t mask; /* g->count_mask: the padded plane's mask buffer (indexed as one plane) */
  /* >= 0: the weights repacked into per-tile panels [G][tile][Cg][taps][packed_tile] (a tile
   * of packed_tile output channels, lower_conv.c's emit_weight_pack), read instead of W. */
  int32_t packed_w;
  int64_t packed_tile;
  /* Input-channel blocking (lower_conv.c's K blocks): ci_count > 0 reduces only the group's
   * input channels [ci_begin, ci_begin + ci_count), starting from the sums of the blocks
   * before in `partial` (a scratch [N, M, O..] with strides partial_strides), and a block
   * other than the last stores its sums there instead of running the epilogue. ci_count 0:
   * every input channel, accumulators from 0, the epilogue (partial unused). */
  stax_kir_index_t ci_begin;
  int64_t ci_count;
  bool ci_last;
  /* >= 0: the loop over the blocks before the last; its first iteration starts from 0, the
   * others from `partial` (one copy of the nest for both). */
  int32_t ci_first_loop;
  int32_t partial;
  lower_sym_t partial_strides[STAX_MAX_RANK]; /* the innermost a constant */
} lower_conv_tile_t;

void lower_conv_emit_tile(lower_t* L, stax_kir_block_t* block, const lower_conv_tile_t* tile);
/* A tile's epilogue at the current output point (L->forms): `value` + B at the point's channel,
 * as the Conv's output, then every group output stored (the group's elementwise ops read it). */
void lower_conv_store_epilogue(lower_t* L, const lower_conv_geometry_t* g, stax_kir_block_t* block,
                               const stax_kir_expr_t* value);
/* Repacks the constant W into per-tile panels [G][tiles][Cg][taps][tile] (the last tile's
 * lanes past Mg unused) in a stage the host runs once per weight; returns the scratch buffer
 * ("wt"), or -1 with the kernel's status set. */
int32_t lower_conv_pack_weights(lower_t* L, const lower_conv_geometry_t* g, int64_t tile);
/* Conv over a small output plane as a GEMM over patches (lower_conv_patch.c): the source (X,
 * or its padded copy, as for a tile), the batch and output sizes (constants, or parameters in
 * a symbolic kernel), and the range of `when` its stages run for (symbolic kernels: the
 * innermost output size; ignored when constant). */
typedef struct lower_conv_patch_t {
  const lower_conv_geometry_t* g;
  int32_t source;
  lower_sym_t src_strides[STAX_MAX_RANK];
  int64_t phases;
  lower_sym_t phase_length;
  lower_sym_t batch;
  lower_sym_t out[STAX_MAX_RANK];
  lower_sym_t when;
  int64_t when_lo, when_hi;
} lower_conv_patch_t;
/* Whether the patch lowering serves this Conv: one group, a constant weight, at least one
 * register tile's output channels, and not switched off (STAX_JIT_CONV_PATCH=0). */
bool lower_conv_patch_fits(const lower_t* L, const lower_conv_geometry_t* g);
STAX_MUST_USE stax_status_t lower_conv_patch(lower_t* L, const lower_conv_patch_t* patch);
/* Rows narrower than this take the patches where they fit: 3.5 native vectors (28 on AVX2),
 * where a position tile of two vectors and its overlapping or narrower last tile do less
 * work per lane than the GEMM; STAX_JIT_CONV_PATCH_BELOW=n overrides (measuring, tests). */
int64_t lower_conv_patch_below(const lower_t* L);
/* An exact-shape Conv whose patches would take more keeps its position tiles. */
#define LOWER_CONV_PATCH_MAX_BYTES ((int64_t)256 << 20)
/* Symbolic groups whose Conv has open spatial dims, and pools (MaxPool, AveragePool with a
 * fixed tap count) over open dims (lower_conv_symbolic.c). */
STAX_MUST_USE stax_status_t lower_conv_symbolic(lower_t* L, const lower_conv_geometry_t* g);

/* A register tile's float32 sums: locals acc<tile>_<r>, r < rows, declared 0 in `block`. */
void lower_declare_accumulators(stax_kir_kernel_t* kernel, stax_kir_block_t* block, int32_t tile,
                                int32_t rows, int32_t* out_locals);
/* The vector width for the kernel's widest compute dtype. */
int32_t lower_vector_width(const lower_t* L);
/* A small constant operand folded at compile time: true with its value when `value` has
 * exactly one element and its contents are known. */
bool lower_constant_scalar(const lower_t* L, int32_t value, double* out_value);

/* ---- op semantics (lower_ops.c) ------------------------------------------------------------ */

/* OK when the node is an elementwise op lowering supports with these dtypes. */
STAX_MUST_USE stax_status_t lower_check_elementwise(const lower_t* L, const stax_jit_node_t* node);
bool lower_is_elementwise(stax_op_t op);
/* Output `slot` of an elementwise node at the current point, its inputs in `space`. */
const stax_kir_expr_t* lower_elementwise_expr(lower_t* L, const stax_jit_node_t* node, int32_t slot,
                                              lower_space_t space);
/* Reads a float attribute (with its ONNX default) or returns INVALID_ARGUMENT. */
STAX_MUST_USE stax_status_t lower_attr_float(const stax_jit_node_t* node, const char* name,
                                             float default_value, double* out_value);

/* ---- kernel families ------------------------------------------------------------------------ */

STAX_MUST_USE stax_status_t lower_elementwise_group(lower_t* L);
/* An elementwise group with open dims of its own (symbolic: lower_elementwise.c). */
STAX_MUST_USE stax_status_t lower_elementwise_symbolic(lower_t* L);
bool lower_is_row_op(stax_op_t op);
STAX_MUST_USE stax_status_t lower_row_group(lower_t* L);
/* The expression of output `slot` of a row node at the current point (its locals computed). */
const stax_kir_expr_t* lower_row_output_expr(lower_t* L, int32_t node, int32_t slot,
                                             lower_space_t space);
bool lower_is_matmul_op(stax_op_t op);
STAX_MUST_USE stax_status_t lower_matmul_group(lower_t* L, int32_t node);
/* A symbolic group's MatMul (lower_matmul_symbolic.c). */
STAX_MUST_USE stax_status_t lower_matmul_symbolic(lower_t* L, int32_t node);
bool lower_is_conv_op(stax_op_t op);
/* A group of one Conv (node) and elementwise nodes over its output's shape. */
STAX_MUST_USE stax_status_t lower_conv_group(lower_t* L, int32_t node);
bool lower_is_pool_op(stax_op_t op);
/* A group of one pooling node and elementwise nodes over its output's shape. */
STAX_MUST_USE stax_status_t lower_pool_group(lower_t* L, int32_t node);

#endif /* STAX_JIT_LOWER_INTERNAL_H_ */
