/* The program: the extended form (the source of truth), its side tables, the compact encoding
 * emitted from it, and the builder used by the compiler, by tests that hand-build bytecode,
 * and (later) by the loader and the JIT.
 *
 * Serialization-friendly by construction: every table is an array of plain structs whose
 * references are int32 indices into other tables (strings are offsets into one string table).
 * The only pointers are the tables themselves, the constant tensors, and the derived data that
 * stax_vm_program_link rebuilds from the tables (kernel node views). A saver writes the tables
 * listed in STAX_VM_PROGRAM_TABLES plus the constants' data; a loader fills the same tables,
 * calls stax_vm_program_link and stax_vm_verify. */
#ifndef STAX_VM_PROGRAM_H_
#define STAX_VM_PROGRAM_H_

#include <stdatomic.h>

#include "base/arena.h"
#include "base/hash_map.h"
#include "ir/graph_internal.h"
#include "stax/vm.h"
#include "vm/isa.h"

#define STAX_VM_NONE (-1)
/* The most elements a DIM_VALUES instruction computes (shape inference's content limit). */
#define STAX_VM_DIM_VALUES_MAX 64

/* ---- extended-form records ---------------------------------------------------------------- */

enum {
  /* A compute instruction whose outputs the kernel allocates (their dims use symbols not bound
   * before it): a shape barrier, a SHAPE_VARIANT usually follows. */
  STAX_VM_INSTRUCTION_DYNAMIC_OUTPUT = 1u << 0,
};

/* Word 1 of a compact instruction: the extended index in bits 0..30 (counters, messages) and
 * DYNAMIC_OUTPUT in bit 31, so the interpreter never reads the extended form. */
#define STAX_VM_CODE_DYNAMIC_OUTPUT INT32_MIN
#define STAX_VM_CODE_INDEX(ins) ((ins)[1] & INT32_MAX)
#define STAX_VM_CODE_KERNEL_ALLOCATES(ins) ((ins)[1] < 0)

typedef struct stax_vm_instruction_t {
  int32_t opcode;
  int32_t node;          /* program node it came from, or -1 */
  int32_t operand_first; /* into operands[] */
  int32_t operand_count; /* words, laid out by the opcode's format */
  int32_t segment;       /* the segment containing it, or -1 */
  uint32_t flags;        /* STAX_VM_INSTRUCTION_* */
} stax_vm_instruction_t;

/* How a descriptor's strides may look. */
typedef enum stax_vm_layout_e {
  STAX_VM_LAYOUT_CONTIGUOUS = 0, /* allocated by the VM or a kernel: row-major */
  STAX_VM_LAYOUT_VIEW = 1,       /* a view (transpose, reshape, slice): any strides */
  STAX_VM_LAYOUT_BROADCAST = 2,  /* a broadcast view: stride 0 on expanded dims */
  STAX_VM_LAYOUT_ANY = 3,        /* borrowed from the caller, constants: any strides */
} stax_vm_layout_t;

enum {
  STAX_VM_DESCRIPTOR_STATIC = 1u << 0, /* every dim is a constant */
  /* The register holds a sequence value (a tensor handle with is_sequence; dtype = the
   * elements', rank 0). Only sequence ops, MOVE, FREE_TENSOR, LOAD/STORE_TENSOR, If joins and
   * loop-carried lists touch such registers (the verifier sees to it). */
  STAX_VM_DESCRIPTOR_SEQUENCE = 1u << 1,
};

typedef struct stax_vm_descriptor_t {
  int32_t dtype;
  int32_t rank;
  int32_t layout;     /* stax_vm_layout_t */
  uint32_t flags;     /* STAX_VM_DESCRIPTOR_* */
  int32_t dims_first; /* rank entries of dims[] */
} stax_vm_descriptor_t;

typedef enum stax_vm_dim_kind_e {
  STAX_VM_DIM_CONSTANT = 0, /* value */
  STAX_VM_DIM_CODE = 1,     /* dim code `code` over the frame's symbol values */
} stax_vm_dim_kind_t;

/* Where a dynamic dim's value comes from at run time. */
enum {
  STAX_VM_DERIVED_FROM_GUARDS = -1,     /* every symbol it uses is bound by the input guards */
  STAX_VM_DERIVED_UNRESOLVED = -2,      /* some symbol is never bound: known only live */
};

typedef struct stax_vm_dim_t {
  int32_t kind;       /* stax_vm_dim_kind_t */
  int32_t code;       /* STAX_VM_DIM_CODE: index into dim_codes[] */
  int64_t value;      /* STAX_VM_DIM_CONSTANT */
  /* The extended form's shape derivation: the latest instruction (extended index) that binds
   * a symbol this dim uses, or STAX_VM_DERIVED_*. Constants: STAX_VM_DERIVED_FROM_GUARDS. */
  int32_t derivation;
} stax_vm_dim_t;

/* A dim expression compiled to postfix code (stax_dim_emit_code). */
typedef struct stax_vm_dim_code_ref_t {
  int32_t first; /* into dim_code_words[] */
  int32_t count;
  int32_t text;  /* string: the expression as printed ("2*S + 1") */
} stax_vm_dim_code_ref_t;

enum {
  STAX_VM_REGISTER_INPUT = 1u << 0,    /* holds a program input */
  STAX_VM_REGISTER_CONSTANT = 1u << 1, /* holds a constant */
  STAX_VM_REGISTER_OUTPUT = 1u << 2,   /* stored to a program output */
};

typedef struct stax_vm_register_t {
  int32_t name;       /* string: the graph value's name */
  int32_t descriptor; /* its shape descriptor */
  uint32_t flags;     /* STAX_VM_REGISTER_* */
} stax_vm_register_t;

/* Symbols of the model's shape context. bound_by is the derivation chain's root. */
enum {
  STAX_VM_BOUND_BY_GUARD = -1, /* an input guard binds it (guard_input, guard_dim) */
  STAX_VM_BOUND_NEVER = -2,    /* no instruction binds it */
};

typedef struct stax_vm_symbol_t {
  int32_t name; /* string */
  int64_t min, max;
  int32_t bound_by;    /* extended index of the first SHAPE_VARIANT binding it, or BOUND_* */
  int32_t guard_input; /* BOUND_BY_GUARD: the input and dim that bind it */
  int32_t guard_dim;
} stax_vm_symbol_t;

/* A program input or output. */
typedef struct stax_vm_io_t {
  int32_t name;            /* string */
  int32_t dtype;
  int32_t rank;
  int32_t reg;             /* the register it is loaded into / stored from */
  int32_t dim_texts_first; /* rank strings in io_dim_texts[]: declared dims as text */
} stax_vm_io_t;

/* Input guards, run before the first instruction. */
typedef enum stax_vm_guard_kind_e {
  STAX_VM_GUARD_BIND = 0,   /* symbol := (input dim - offset) / scale, exact division */
  STAX_VM_GUARD_CHECK = 1,  /* input dim == dim code */
  STAX_VM_GUARD_RANGE = 2,  /* min <= symbol <= max */
  STAX_VM_GUARD_DERIVE = 3, /* symbol := dim code (a symbol unified with an expression) */
} stax_vm_guard_kind_t;

typedef struct stax_vm_guard_t {
  int32_t kind;
  int32_t input;  /* BIND, CHECK */
  int32_t dim;    /* BIND, CHECK */
  int32_t symbol; /* BIND, RANGE, DERIVE */
  int32_t code;   /* CHECK, DERIVE */
  int64_t scale, offset; /* BIND */
  int64_t min, max;      /* RANGE */
} stax_vm_guard_t;

/* SHAPE_VARIANT tables. */
typedef enum stax_vm_binding_kind_e {
  STAX_VM_BINDING_BIND = 0,   /* symbol := (reg dim - offset) / scale; range checked */
  STAX_VM_BINDING_CHECK = 1,  /* reg dim == dim code */
  STAX_VM_BINDING_DERIVE = 2, /* symbol := dim code */
} stax_vm_binding_kind_t;

typedef struct stax_vm_shape_binding_t {
  int32_t kind;
  int32_t reg;    /* BIND, CHECK */
  int32_t dim;    /* BIND, CHECK */
  int32_t symbol; /* BIND, DERIVE */
  int32_t code;   /* CHECK, DERIVE */
  int64_t scale, offset; /* BIND */
} stax_vm_shape_binding_t;

typedef struct stax_vm_shape_variant_t {
  int32_t first; /* into shape_bindings[] */
  int32_t count;
} stax_vm_shape_variant_t;

/* ONNX Loop. Register lists live in loop_registers[] from `lists_first`, in this order:
 * initial[carried], body_in[carried], body_out[carried], outputs[carried],
 * scan_body_out[scans], scan_outputs[scans]. */
typedef struct stax_vm_loop_t {
  int32_t node;               /* the Loop node */
  int32_t trip_register;      /* optional (-1): M */
  int32_t cond_register;      /* optional (-1): the initial condition */
  int32_t iteration_register; /* body input 0: the iteration number (int64 scalar) */
  int32_t cond_in_register;   /* body input 1: the condition (bool scalar) */
  int32_t cond_out_register;  /* body output 0 */
  int32_t carried_count;
  int32_t scan_count;
  int32_t lists_first;
} stax_vm_loop_t;

static inline int32_t stax_vm_loop_list_size(const stax_vm_loop_t* loop) {
  return 4 * loop->carried_count + 2 * loop->scan_count;
}

/* JUMP_IF_SHAPE_UNMATCHED signatures. */
enum {
  STAX_VM_SIGNATURE_CHECK_STRIDES = 1u << 0,
};

typedef struct stax_vm_signature_entry_t {
  int32_t reg;
  int32_t dtype;
  int32_t rank;
  uint32_t flags;       /* STAX_VM_SIGNATURE_* */
  int32_t values_first; /* rank dims, then (CHECK_STRIDES) rank strides, in signature_values */
} stax_vm_signature_entry_t;

typedef struct stax_vm_signature_t {
  int32_t first; /* into signature_entries[]; for a JIT guard: the segment */
  int32_t count; /* entries, or STAX_VM_SIGNATURE_JIT */
} stax_vm_signature_t;

/* signature.count of a JIT guard: the signature is not a fixed list but "the live shapes of
 * segment `first` match one of its compiled versions" (src/vm/jit_tier.c); the CALL_FUNC
 * of STAX_VM_JIT_FUNCTION that follows the guard runs the version it matched. */
#define STAX_VM_SIGNATURE_JIT (-1)
/* The reserved host-function name of the JIT's segment call (contexts bind it themselves;
 * stax_vm_register_function refuses it). */
#define STAX_VM_JIT_FUNCTION "stax.jit"


/* A run of bytecode between shape barriers: the JIT's unit of specialization. */
typedef struct stax_vm_segment_t {
  int32_t first; /* extended index of its first instruction (its PROFILE_POINT if any) */
  int32_t count;
} stax_vm_segment_t;

/* Model nodes copied into the program; operands are registers. */
typedef struct stax_vm_node_t {
  int32_t op;
  int32_t name;         /* string */
  int32_t inputs_first; /* into node_registers[]; -1 entries for omitted optional inputs */
  int32_t input_count;
  int32_t outputs_first;
  int32_t output_count;
  int32_t attrs_first;  /* into attrs[] */
  int32_t attr_count;
} stax_vm_node_t;

/* An attribute: the payload field used depends on type. */
typedef struct stax_vm_attr_t {
  int32_t name;  /* string */
  int32_t type;  /* stax_attr_type_t */
  int64_t i;     /* INT */
  float f;       /* FLOAT */
  int32_t first; /* STRING: string; INTS/FLOATS/STRINGS: first entry; TENSOR: constant; GRAPH: -1 */
  int32_t count; /* INTS/FLOATS/STRINGS */
} stax_vm_attr_t;

/* Every growable table of the program: X(element type, name). Each becomes the fields
 * `type* name; int32_t name##_count;` (and a capacity used while building). Program files
 * store every table but `code` as one section, tagged by its position in this list, with the
 * record layout serialize.c lists per table: a new table or field needs its entry there and a
 * new STAX_VM_FILE_VERSION. */
#define STAX_VM_PROGRAM_TABLES(X)                          \
  X(char, strings)                                         \
  X(stax_vm_instruction_t, instructions)                   \
  X(int32_t, operands)                                     \
  X(int32_t, code)                                         \
  X(stax_vm_register_t, registers)                         \
  X(stax_vm_descriptor_t, descriptors)                     \
  X(stax_vm_dim_t, dims)                                   \
  X(stax_vm_dim_code_ref_t, dim_codes)                     \
  X(stax_dim_code_t, dim_code_words)                       \
  X(stax_vm_symbol_t, symbols)                             \
  X(stax_vm_io_t, inputs)                                  \
  X(stax_vm_io_t, outputs)                                 \
  X(int32_t, io_dim_texts)                                 \
  X(stax_vm_guard_t, guards)                               \
  X(stax_vm_shape_variant_t, shape_variants)               \
  X(stax_vm_shape_binding_t, shape_bindings)               \
  X(stax_vm_loop_t, loops)                                 \
  X(int32_t, loop_registers)                               \
  X(stax_vm_signature_t, signatures)                       \
  X(stax_vm_signature_entry_t, signature_entries)          \
  X(int64_t, signature_values)                             \
  X(int32_t, functions)                                    \
  X(stax_vm_segment_t, segments)                           \
  X(stax_vm_node_t, nodes)                                 \
  X(int32_t, node_registers)                               \
  X(stax_vm_attr_t, attrs)                                 \
  X(int64_t, attr_ints)                                    \
  X(float, attr_floats)                                    \
  X(int32_t, attr_strings)                                 \
  X(stax_tensor_t*, constants) /* retained; shared read-only */

struct stax_program_s {
  atomic_int_fast32_t refcount;
  stax_allocator_t allocator;

#define STAX_VM_TABLE_FIELDS(type, name) \
  type* name;                            \
  int32_t name##_count;
  STAX_VM_PROGRAM_TABLES(STAX_VM_TABLE_FIELDS)
#undef STAX_VM_TABLE_FIELDS

  struct {
#define STAX_VM_TABLE_CAPACITY(type, name) int32_t name;
    STAX_VM_PROGRAM_TABLES(STAX_VM_TABLE_CAPACITY)
#undef STAX_VM_TABLE_CAPACITY
  } capacity;

  /* Largest register list of any instruction (sizes the interpreter's scratch arrays). */
  int32_t max_list_length;
  /* Total BIND entries in shape variants: bounds the shape stack. */
  int32_t max_shape_stack;

  /* Derived by stax_vm_program_link, never serialized: the kernels' view of each node. */
  stax_arena_t link_arena;
  stax_node_t* kernel_nodes;
  /* The memory plan (vm/memory_plan.h), in link_arena; NULL when nothing is planned. */
  struct stax_vm_memory_plan_s* memory_plan;
  bool linked;
  /* The JIT tier's kernel cache (jit_tier.c), created by the first context that runs with the
   * JIT on and shared by all; mutable state behind its own lock, never serialized. */
  _Atomic(struct stax_vm_jit_cache_s*) jit_cache;

  /* What the graph passes did when the program was compiled (NULL when loaded or hand-built);
   * never serialized. */
  struct stax_pass_log_t* pass_log;

  /* Builder state, dropped when the program is finalized. */
  stax_hash_map_t* string_index; /* string -> offset, for deduplication */
};

/* Entry `index` of a table that may be empty (NULL): a loaded or hand-built program can have
 * no operands or node registers at all, and NULL + 0 is undefined. */
#define STAX_VM_TABLE_AT(table, index) ((table) ? (table) + (index) : NULL)

/* ---- building ----------------------------------------------------------------------------- */

/* An empty program (refcount 1) ready for the append functions below. */
STAX_MUST_USE stax_status_t stax_vm_program_create(stax_allocator_t allocator,
                                                   stax_program_t** out_program);

/* Grows table storage; `element_size` bytes per entry. Used through STAX_VM_APPEND. */
STAX_MUST_USE stax_status_t stax_vm_table_reserve(stax_allocator_t allocator, void** data,
                                                  int32_t* capacity, int32_t count,
                                                  int32_t extra, size_t element_size);
/* Appends `count` entries from `items` to a table; *out_first (may be NULL) gets the index of
 * the first one. */
#define STAX_VM_APPEND_N(program, table, items, n, out_first)                                  \
  stax_vm_table_append((program)->allocator, (void**)&(program)->table,                      \
                       &(program)->table##_count, &(program)->capacity.table,                 \
                       sizeof(*(program)->table), (items), (n), (out_first))
#define STAX_VM_APPEND(program, table, item_ptr, out_index) \
  STAX_VM_APPEND_N(program, table, item_ptr, 1, out_index)
STAX_MUST_USE stax_status_t stax_vm_table_append(stax_allocator_t allocator, void** data,
                                                 int32_t* count, int32_t* capacity,
                                                 size_t element_size, const void* items,
                                                 int32_t n, int32_t* out_first);

/* Interns a string; NULL gives -1. */
STAX_MUST_USE stax_status_t stax_vm_program_add_string(stax_program_t* program,
                                                       const char* text, int32_t* out_offset);
/* The string at `offset`, "" for -1 or a bad offset. */
const char* stax_vm_program_string(const stax_program_t* program, int32_t offset);

STAX_MUST_USE stax_status_t stax_vm_program_add_descriptor(stax_program_t* program,
                                                           stax_dtype_t dtype, int32_t rank,
                                                           stax_vm_layout_t layout,
                                                           const stax_vm_dim_t* dims,
                                                           int32_t* out_descriptor);
/* A descriptor whose dims are all constants. */
STAX_MUST_USE stax_status_t stax_vm_program_add_static_descriptor(stax_program_t* program,
                                                                  stax_dtype_t dtype,
                                                                  int32_t rank,
                                                                  const int64_t* dims,
                                                                  stax_vm_layout_t layout,
                                                                  int32_t* out_descriptor);
STAX_MUST_USE stax_status_t stax_vm_program_add_register(stax_program_t* program,
                                                         const char* name, int32_t descriptor,
                                                         uint32_t flags, int32_t* out_register);
/* Instruction operands are copied; out_index (may be NULL) gets its extended index. */
STAX_MUST_USE stax_status_t stax_vm_program_add_instruction(stax_program_t* program,
                                                            int32_t opcode, int32_t node,
                                                            const int32_t* operands,
                                                            int32_t operand_count,
                                                            int32_t* out_index);
/* A program input/output. dim_texts may be NULL (all "?"). */
STAX_MUST_USE stax_status_t stax_vm_program_add_io(stax_program_t* program, bool is_output,
                                                   const char* name, stax_dtype_t dtype,
                                                   int32_t rank, const char* const* dim_texts,
                                                   int32_t reg, int32_t* out_index);
STAX_MUST_USE stax_status_t stax_vm_program_add_constant(stax_program_t* program,
                                                         stax_tensor_t* tensor,
                                                         int32_t* out_index);
STAX_MUST_USE stax_status_t stax_vm_program_add_function(stax_program_t* program,
                                                         const char* name, int32_t* out_index);
/* A signature over `count` registers: for entry k, values holds rank dims then (with
 * CHECK_STRIDES) rank strides. */
STAX_MUST_USE stax_status_t stax_vm_program_add_signature(
    stax_program_t* program, int32_t count, const stax_vm_signature_entry_t* entries,
    const int64_t* const* values, int32_t* out_index);

/* Finishes a built program: segments (and PROFILE_POINTs unless disabled), shape derivations,
 * the compact form, the link step, and the verifier. Builder state is dropped. */
typedef struct stax_vm_finalize_options_t {
  bool insert_profile_points;
} stax_vm_finalize_options_t;
STAX_MUST_USE stax_status_t stax_vm_program_finalize(stax_program_t* program,
                                                     const stax_vm_finalize_options_t* options);

/* Rebuilds the derived data (kernel node views) from the tables. Idempotent. */
STAX_MUST_USE stax_status_t stax_vm_program_link(stax_program_t* program);
/* Sizes the interpreter's scratch (max_list_length, max_shape_stack) from verified tables. */
void stax_vm_program_measure(stax_program_t* program);

/* ---- program files (serialize.c writes, deserialize.c reads; docs/vm.md "Program files") -- */

#define STAX_VM_FILE_MAGIC "STAXPROG" /* 8 bytes, no terminator on disk */
/* 2: JIT guards at segment entries; 3: the BCAST dim-code op. Version 2 files still load
 * (they differ only in not using BCAST), checked against the fingerprint of their version. */
#define STAX_VM_FILE_VERSION 3u
#define STAX_VM_FILE_OLDEST_VERSION 2u
#define STAX_VM_FILE_BYTE_ORDER 0x01020304u /* written little-endian: 04 03 02 01 */
#define STAX_VM_FILE_HEADER_SIZE 40
#define STAX_VM_FILE_SECTION_HEADER_SIZE 12 /* u32 tag, u64 body length */

/* One field of a record as stored: `size` bytes (1, 4 or 8) at `offset` in the struct, written
 * little-endian; records are the fields back to back, no padding. */
typedef struct stax_vm_file_field_t {
  uint16_t offset;
  uint16_t size;
} stax_vm_file_field_t;

typedef enum stax_vm_file_storage_e {
  STAX_VM_FILE_NOT_STORED = 0, /* the compact form: re-emitted at load */
  STAX_VM_FILE_RECORDS = 1,    /* u32 count, u32 record size, records */
  STAX_VM_FILE_CONSTANTS = 2,  /* u32 count, then per tensor dtype, rank, dims, data */
} stax_vm_file_storage_t;

/* How one program table is stored; stax_vm_file_tables[i] describes the i-th table of
 * STAX_VM_PROGRAM_TABLES, whose section tag is i + 1. */
typedef struct stax_vm_file_table_t {
  const char* name;
  stax_vm_file_storage_t storage;
  size_t element_size; /* in memory */
  size_t data_offset;  /* offsetof(stax_program_t, table) */
  size_t count_offset;
  size_t capacity_offset;
  const stax_vm_file_field_t* fields;
  int32_t field_count;
} stax_vm_file_table_t;

extern const stax_vm_file_table_t stax_vm_file_tables[];
extern const int32_t stax_vm_file_table_count;
/* Bytes per record on disk: the sum of the field sizes. */
int32_t stax_vm_file_record_size(const stax_vm_file_table_t* table);
/* A hash of everything whose numbering a file relies on (opcode names, ops, dtypes, attribute
 * types): a file from a build that numbers them differently is refused, not misread. */
uint64_t stax_vm_isa_fingerprint(void);
/* The fingerprint a build of file format `version` (OLDEST..FILE_VERSION) wrote. */
uint64_t stax_vm_isa_fingerprint_for(uint32_t version);
/* The checksum of a file: header bytes [0, 32) and the payload. */
uint64_t stax_vm_file_checksum(const uint8_t* header, const uint8_t* payload, size_t size);

/* ---- passes over a built program (segments.c, emit.c, verify.c, disasm.c) ---------------- */

/* Splits the instruction list into segments and records them (instructions[].segment too);
 * with insert_profile_points, a PROFILE_POINT starts each segment and a JIT guard precedes it
 * (jumps retargeted):
 *     JUMP_IF_SHAPE_UNMATCHED jit(s) -> P     live shapes match no compiled version of s
 *     CALL_FUNC stax.jit () -> ()             run the version the guard matched
 *     JUMP -> E                               past the segment
 *  P: PROFILE_POINT s                         the interpreted segment
 *     ...
 *  E:                                                                                      */
STAX_MUST_USE stax_status_t stax_vm_program_build_segments(stax_program_t* program,
                                                           bool insert_profile_points);
/* Records each symbol's first binder and each dynamic dim's derivation. */
void stax_vm_program_compute_derivations(stax_program_t* program);
/* Extended form -> compact words (replaces code[]). */
STAX_MUST_USE stax_status_t stax_vm_emit(stax_program_t* program);
/* Checks the extended form, the side tables and the compact form, and that the compact form
 * is exactly what the extended form encodes. INVALID_ARGUMENT naming what is wrong. */
STAX_MUST_USE stax_status_t stax_vm_verify(const stax_program_t* program);

/* Inserts new instructions before positions of the current list. `positions` (sorted
 * ascending, values 0..instruction_count) and `instructions` (with operands in
 * `new_operands`, operand_first relative to it) have `count` entries. Jumps to a position
 * land on the first instruction inserted before it. out_map (may be NULL; instruction_count+1
 * entries, caller-allocated) receives each old position's new index. */
STAX_MUST_USE stax_status_t stax_vm_program_insert(stax_program_t* program, int32_t count,
                                                   const int32_t* positions,
                                                   const stax_vm_instruction_t* instructions,
                                                   const int32_t* new_operands,
                                                   int32_t* out_map);

/* Removes the instructions with remove[i] set (instruction_count entries); jumps to one land
 * on the next instruction kept. out_map (may be NULL; instruction_count+1 entries) receives
 * each old position's new index. */
STAX_MUST_USE stax_status_t stax_vm_program_remove(stax_program_t* program, const bool* remove,
                                                   int32_t* out_map);

/* Calls fn for every register an extended instruction references (operands, loop tables,
 * shape-variant and signature entries); is_def tells whether the instruction writes it. */
typedef void (*stax_vm_register_visit_fn)(void* ctx, int32_t reg, bool is_def);
void stax_vm_instruction_registers(const stax_program_t* program, int32_t instruction,
                                   stax_vm_register_visit_fn fn, void* ctx);

/* Whether register `reg` holds sequence values (its descriptor's SEQUENCE flag). */
static inline bool stax_vm_register_is_sequence(const stax_program_t* program, int32_t reg) {
  return (program->descriptors[program->registers[reg].descriptor].flags &
          STAX_VM_DESCRIPTOR_SEQUENCE) != 0;
}

/* "float32[B, S, 64]" for a descriptor, into buf (snprintf-style). */
int stax_vm_descriptor_text(const stax_program_t* program, int32_t descriptor, char* buf,
                            size_t size);

#endif /* STAX_VM_PROGRAM_H_ */
