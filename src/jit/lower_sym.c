/* Extents of symbolic kernels (kernel_ir.h, "symbolic kernels"): a quantity that is either a
 * compile-time constant or a constant times one run-time parameter, and the small algebra the
 * symbolic lowerings (lower_matmul_symbolic.c, lower_conv_symbolic.c) build their tile
 * counts, strides and offsets with. Sums never need a parameter of their own: they go into
 * indices term by term. */
#include <stdio.h>

#include "jit/lower_internal.h"

lower_sym_t lower_sym_const(int64_t c) {
  return (lower_sym_t){c, -1};
}

lower_sym_t lower_sym_param(int32_t p) {
  return (lower_sym_t){1, p};
}

lower_sym_t lower_sym_mul(stax_kir_kernel_t* k, lower_sym_t a, lower_sym_t b) {
  if (a.c == 0 || b.c == 0) return lower_sym_const(0);
  if (a.p < 0) return (lower_sym_t){a.c * b.c, b.p};
  if (b.p < 0) return (lower_sym_t){a.c * b.c, a.p};
  return (lower_sym_t){a.c * b.c, stax_kir_param_product(k, a.p, b.p)};
}

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

int32_t lower_sym_plain(stax_kir_kernel_t* k, const char* name, lower_sym_t s) {
  if (s.p < 0 || s.c == 1) return s.p;
  return stax_kir_add_derived_param(k, name, s.p, s.c, 0, 1, 0, 0, 0, 0);
}

lower_sym_t lower_sym_derive(stax_kir_kernel_t* k, const char* name, lower_sym_t x, int64_t mul0,
                             int64_t add0, int64_t div0, int64_t mul1, int64_t add1,
                             int64_t div1, int64_t offset) {
  if (x.p < 0) {
    int64_t v = offset + mul0 * floor_div(x.c + add0, div0);
    if (div1 > 0) v += mul1 * floor_div(x.c + add1, div1);
    return lower_sym_const(v);
  }
  int32_t of = lower_sym_plain(k, name, x);
  return lower_sym_param(
      stax_kir_add_derived_param(k, name, of, mul0, add0, div0, mul1, add1, div1, offset));
}

int64_t lower_sym_example(const stax_kir_kernel_t* k, lower_sym_t s) {
  if (s.p < 0) return s.c;
  int64_t values[STAX_KIR_MAX_PARAMS];
  if (!stax_kir_params_example(k, values)) return 0;
  return s.c * values[s.p];
}

void lower_sym_index_term(stax_kir_kernel_t* k, stax_kir_index_t* x, int32_t loop,
                          lower_sym_t coefficient) {
  stax_kir_index_add_term_scaled(k, x, loop, coefficient.c, coefficient.p);
}

void lower_sym_index_add(stax_kir_kernel_t* k, stax_kir_index_t* x, lower_sym_t s) {
  if (s.p < 0)
    x->constant += s.c;
  else
    stax_kir_index_add_param(k, x, s.p, s.c);
}

void lower_sym_index_add_scaled(stax_kir_kernel_t* k, stax_kir_index_t* x,
                                const stax_kir_index_t* other, lower_sym_t s) {
  if (s.p < 0) {
    stax_kir_index_add_scaled(k, x, other, s.c);
    return;
  }
  stax_kir_index_t scaled = stax_kir_index_constant(0);
  stax_kir_index_add_scaled(k, &scaled, other, s.c);
  stax_kir_index_add_scaled_param(k, x, &scaled, s.p);
}

stax_kir_loop_t* lower_sym_loop(stax_kir_kernel_t* k, stax_kir_block_t* block, const char* base,
                                lower_sym_t extent) {
  char name[32];
  snprintf(name, sizeof(name), "%s%d", base, (int)k->loop_count);
  if (extent.p < 0) return stax_kir_add_loop(k, block, name, extent.c < 0 ? 0 : extent.c);
  stax_kir_loop_t* loop = stax_kir_add_loop(k, block, name, 0);
  if (loop) loop->extent_param = lower_sym_plain(k, name, extent);
  return loop;
}

bool lower_sym_possible(lower_sym_t s, int64_t lo, int64_t hi) {
  return s.p >= 0 || (s.c >= lo && s.c <= hi);
}

void lower_sym_stage_when(stax_kir_kernel_t* k, lower_sym_t s, int64_t lo, int64_t hi) {
  if (s.p >= 0) stax_kir_stage_when(k, lower_sym_plain(k, "when", s), lo, hi);
}
