/* Saving programs: the file format's table of record layouts (shared with deserialize.c), the
 * instruction-set fingerprint and checksum, and the writer behind stax_program_serialize and
 * stax_program_save.
 *
 * A file is a 40-byte header and a payload of sections, one per table of
 * STAX_VM_PROGRAM_TABLES except the compact form (the loader re-emits it). Every value is
 * little-endian whatever the host, records are their fields back to back (no padding), and
 * constants are written as dtype, rank, dims and their elements in row-major order. The
 * layout is documented in docs/vm.md ("Program files"). */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "runtime/tensor_internal.h"
#include "vm/program.h"

/* ---- record layouts -------------------------------------------------------------------------- */

#define STAX_VM_FIELD(type, member) \
  {(uint16_t)offsetof(type, member), (uint16_t)sizeof(((type*)0)->member)}

static const stax_vm_file_field_t stax_vm_fields_instruction[] = {
    STAX_VM_FIELD(stax_vm_instruction_t, opcode),
    STAX_VM_FIELD(stax_vm_instruction_t, node),
    STAX_VM_FIELD(stax_vm_instruction_t, operand_first),
    STAX_VM_FIELD(stax_vm_instruction_t, operand_count),
    STAX_VM_FIELD(stax_vm_instruction_t, segment),
    STAX_VM_FIELD(stax_vm_instruction_t, flags),
};
static const stax_vm_file_field_t stax_vm_fields_register[] = {
    STAX_VM_FIELD(stax_vm_register_t, name),
    STAX_VM_FIELD(stax_vm_register_t, descriptor),
    STAX_VM_FIELD(stax_vm_register_t, flags),
};
static const stax_vm_file_field_t stax_vm_fields_descriptor[] = {
    STAX_VM_FIELD(stax_vm_descriptor_t, dtype),  STAX_VM_FIELD(stax_vm_descriptor_t, rank),
    STAX_VM_FIELD(stax_vm_descriptor_t, layout), STAX_VM_FIELD(stax_vm_descriptor_t, flags),
    STAX_VM_FIELD(stax_vm_descriptor_t, dims_first),
};
static const stax_vm_file_field_t stax_vm_fields_dim[] = {
    STAX_VM_FIELD(stax_vm_dim_t, kind),
    STAX_VM_FIELD(stax_vm_dim_t, code),
    STAX_VM_FIELD(stax_vm_dim_t, value),
    STAX_VM_FIELD(stax_vm_dim_t, derivation),
};
static const stax_vm_file_field_t stax_vm_fields_dim_code_ref[] = {
    STAX_VM_FIELD(stax_vm_dim_code_ref_t, first),
    STAX_VM_FIELD(stax_vm_dim_code_ref_t, count),
    STAX_VM_FIELD(stax_vm_dim_code_ref_t, text),
};
static const stax_vm_file_field_t stax_vm_fields_dim_code_word[] = {
    STAX_VM_FIELD(stax_dim_code_t, op),
    STAX_VM_FIELD(stax_dim_code_t, value),
};
static const stax_vm_file_field_t stax_vm_fields_symbol[] = {
    STAX_VM_FIELD(stax_vm_symbol_t, name),        STAX_VM_FIELD(stax_vm_symbol_t, min),
    STAX_VM_FIELD(stax_vm_symbol_t, max),         STAX_VM_FIELD(stax_vm_symbol_t, bound_by),
    STAX_VM_FIELD(stax_vm_symbol_t, guard_input), STAX_VM_FIELD(stax_vm_symbol_t, guard_dim),
};
static const stax_vm_file_field_t stax_vm_fields_io[] = {
    STAX_VM_FIELD(stax_vm_io_t, name), STAX_VM_FIELD(stax_vm_io_t, dtype),
    STAX_VM_FIELD(stax_vm_io_t, rank), STAX_VM_FIELD(stax_vm_io_t, reg),
    STAX_VM_FIELD(stax_vm_io_t, dim_texts_first),
};
static const stax_vm_file_field_t stax_vm_fields_guard[] = {
    STAX_VM_FIELD(stax_vm_guard_t, kind),   STAX_VM_FIELD(stax_vm_guard_t, input),
    STAX_VM_FIELD(stax_vm_guard_t, dim),    STAX_VM_FIELD(stax_vm_guard_t, symbol),
    STAX_VM_FIELD(stax_vm_guard_t, code),   STAX_VM_FIELD(stax_vm_guard_t, scale),
    STAX_VM_FIELD(stax_vm_guard_t, offset), STAX_VM_FIELD(stax_vm_guard_t, min),
    STAX_VM_FIELD(stax_vm_guard_t, max),
};
static const stax_vm_file_field_t stax_vm_fields_shape_variant[] = {
    STAX_VM_FIELD(stax_vm_shape_variant_t, first),
    STAX_VM_FIELD(stax_vm_shape_variant_t, count),
};
static const stax_vm_file_field_t stax_vm_fields_signature[] = {
    STAX_VM_FIELD(stax_vm_signature_t, first),
    STAX_VM_FIELD(stax_vm_signature_t, count),
};
static const stax_vm_file_field_t stax_vm_fields_segment[] = {
    STAX_VM_FIELD(stax_vm_segment_t, first),
    STAX_VM_FIELD(stax_vm_segment_t, count),
};
static const stax_vm_file_field_t stax_vm_fields_shape_binding[] = {
    STAX_VM_FIELD(stax_vm_shape_binding_t, kind),  STAX_VM_FIELD(stax_vm_shape_binding_t, reg),
    STAX_VM_FIELD(stax_vm_shape_binding_t, dim),   STAX_VM_FIELD(stax_vm_shape_binding_t, symbol),
    STAX_VM_FIELD(stax_vm_shape_binding_t, code),  STAX_VM_FIELD(stax_vm_shape_binding_t, scale),
    STAX_VM_FIELD(stax_vm_shape_binding_t, offset),
};
static const stax_vm_file_field_t stax_vm_fields_loop[] = {
    STAX_VM_FIELD(stax_vm_loop_t, node),
    STAX_VM_FIELD(stax_vm_loop_t, trip_register),
    STAX_VM_FIELD(stax_vm_loop_t, cond_register),
    STAX_VM_FIELD(stax_vm_loop_t, iteration_register),
    STAX_VM_FIELD(stax_vm_loop_t, cond_in_register),
    STAX_VM_FIELD(stax_vm_loop_t, cond_out_register),
    STAX_VM_FIELD(stax_vm_loop_t, carried_count),
    STAX_VM_FIELD(stax_vm_loop_t, scan_count),
    STAX_VM_FIELD(stax_vm_loop_t, lists_first),
};
static const stax_vm_file_field_t stax_vm_fields_signature_entry[] = {
    STAX_VM_FIELD(stax_vm_signature_entry_t, reg),
    STAX_VM_FIELD(stax_vm_signature_entry_t, dtype),
    STAX_VM_FIELD(stax_vm_signature_entry_t, rank),
    STAX_VM_FIELD(stax_vm_signature_entry_t, flags),
    STAX_VM_FIELD(stax_vm_signature_entry_t, values_first),
};
static const stax_vm_file_field_t stax_vm_fields_node[] = {
    STAX_VM_FIELD(stax_vm_node_t, op),          STAX_VM_FIELD(stax_vm_node_t, name),
    STAX_VM_FIELD(stax_vm_node_t, inputs_first), STAX_VM_FIELD(stax_vm_node_t, input_count),
    STAX_VM_FIELD(stax_vm_node_t, outputs_first), STAX_VM_FIELD(stax_vm_node_t, output_count),
    STAX_VM_FIELD(stax_vm_node_t, attrs_first), STAX_VM_FIELD(stax_vm_node_t, attr_count),
};
/* GRAPH attributes keep only name and type: subgraphs were compiled inline. */
static const stax_vm_file_field_t stax_vm_fields_attr[] = {
    STAX_VM_FIELD(stax_vm_attr_t, name),  STAX_VM_FIELD(stax_vm_attr_t, type),
    STAX_VM_FIELD(stax_vm_attr_t, i),     STAX_VM_FIELD(stax_vm_attr_t, f),
    STAX_VM_FIELD(stax_vm_attr_t, first), STAX_VM_FIELD(stax_vm_attr_t, count),
};
static const stax_vm_file_field_t stax_vm_fields_char[] = {{0, 1}};
static const stax_vm_file_field_t stax_vm_fields_word32[] = {{0, 4}};
static const stax_vm_file_field_t stax_vm_fields_word64[] = {{0, 8}};

/* A field added to a struct must be added to its list above (and STAX_VM_FILE_VERSION
 * bumped); these sizes (for ABIs that align int64 to 8) make such a change fail to compile
 * here instead of silently dropping the field from files. */
#define STAX_VM_CHECK_SIZE(type, bytes)                                     \
  _Static_assert(_Alignof(int64_t) != 8 || sizeof(type) == (bytes),         \
                 #type " changed: update its field list in serialize.c")
STAX_VM_CHECK_SIZE(stax_vm_instruction_t, 24);
STAX_VM_CHECK_SIZE(stax_vm_register_t, 12);
STAX_VM_CHECK_SIZE(stax_vm_descriptor_t, 20);
STAX_VM_CHECK_SIZE(stax_vm_dim_t, 24);
STAX_VM_CHECK_SIZE(stax_vm_dim_code_ref_t, 12);
STAX_VM_CHECK_SIZE(stax_dim_code_t, 16);
STAX_VM_CHECK_SIZE(stax_vm_symbol_t, 40);
STAX_VM_CHECK_SIZE(stax_vm_io_t, 20);
STAX_VM_CHECK_SIZE(stax_vm_guard_t, 56);
STAX_VM_CHECK_SIZE(stax_vm_shape_variant_t, 8);
STAX_VM_CHECK_SIZE(stax_vm_shape_binding_t, 40);
STAX_VM_CHECK_SIZE(stax_vm_loop_t, 36);
STAX_VM_CHECK_SIZE(stax_vm_signature_t, 8);
STAX_VM_CHECK_SIZE(stax_vm_signature_entry_t, 20);
STAX_VM_CHECK_SIZE(stax_vm_segment_t, 8);
STAX_VM_CHECK_SIZE(stax_vm_node_t, 32);
STAX_VM_CHECK_SIZE(stax_vm_attr_t, 32);
_Static_assert(sizeof(float) == 4, "attribute floats are stored as 32-bit words");

/* Per table: how it is stored and its record layout. A table added to
 * STAX_VM_PROGRAM_TABLES without an entry here fails to compile. */
#define STAX_VM_RECORDS(fields) \
  STAX_VM_FILE_RECORDS, fields, (int32_t)(sizeof(fields) / sizeof(fields[0]))
#define STAX_VM_LAYOUT_strings STAX_VM_RECORDS(stax_vm_fields_char)
#define STAX_VM_LAYOUT_instructions STAX_VM_RECORDS(stax_vm_fields_instruction)
#define STAX_VM_LAYOUT_operands STAX_VM_RECORDS(stax_vm_fields_word32)
#define STAX_VM_LAYOUT_code STAX_VM_FILE_NOT_STORED, NULL, 0
#define STAX_VM_LAYOUT_registers STAX_VM_RECORDS(stax_vm_fields_register)
#define STAX_VM_LAYOUT_descriptors STAX_VM_RECORDS(stax_vm_fields_descriptor)
#define STAX_VM_LAYOUT_dims STAX_VM_RECORDS(stax_vm_fields_dim)
#define STAX_VM_LAYOUT_dim_codes STAX_VM_RECORDS(stax_vm_fields_dim_code_ref)
#define STAX_VM_LAYOUT_dim_code_words STAX_VM_RECORDS(stax_vm_fields_dim_code_word)
#define STAX_VM_LAYOUT_symbols STAX_VM_RECORDS(stax_vm_fields_symbol)
#define STAX_VM_LAYOUT_inputs STAX_VM_RECORDS(stax_vm_fields_io)
#define STAX_VM_LAYOUT_outputs STAX_VM_RECORDS(stax_vm_fields_io)
#define STAX_VM_LAYOUT_io_dim_texts STAX_VM_RECORDS(stax_vm_fields_word32)
#define STAX_VM_LAYOUT_guards STAX_VM_RECORDS(stax_vm_fields_guard)
#define STAX_VM_LAYOUT_shape_variants STAX_VM_RECORDS(stax_vm_fields_shape_variant)
#define STAX_VM_LAYOUT_shape_bindings STAX_VM_RECORDS(stax_vm_fields_shape_binding)
#define STAX_VM_LAYOUT_loops STAX_VM_RECORDS(stax_vm_fields_loop)
#define STAX_VM_LAYOUT_loop_registers STAX_VM_RECORDS(stax_vm_fields_word32)
#define STAX_VM_LAYOUT_signatures STAX_VM_RECORDS(stax_vm_fields_signature)
#define STAX_VM_LAYOUT_signature_entries STAX_VM_RECORDS(stax_vm_fields_signature_entry)
#define STAX_VM_LAYOUT_signature_values STAX_VM_RECORDS(stax_vm_fields_word64)
#define STAX_VM_LAYOUT_functions STAX_VM_RECORDS(stax_vm_fields_word32)
#define STAX_VM_LAYOUT_segments STAX_VM_RECORDS(stax_vm_fields_segment)
#define STAX_VM_LAYOUT_nodes STAX_VM_RECORDS(stax_vm_fields_node)
#define STAX_VM_LAYOUT_node_registers STAX_VM_RECORDS(stax_vm_fields_word32)
#define STAX_VM_LAYOUT_attrs STAX_VM_RECORDS(stax_vm_fields_attr)
#define STAX_VM_LAYOUT_attr_ints STAX_VM_RECORDS(stax_vm_fields_word64)
#define STAX_VM_LAYOUT_attr_floats STAX_VM_RECORDS(stax_vm_fields_word32)
#define STAX_VM_LAYOUT_attr_strings STAX_VM_RECORDS(stax_vm_fields_word32)
#define STAX_VM_LAYOUT_constants STAX_VM_FILE_CONSTANTS, NULL, 0

/* Expands the layout macro first so its commas become initializer commas. */
#define STAX_VM_TABLE_ENTRY(type, name) \
  STAX_VM_TABLE_ENTRY_(name, sizeof(type), STAX_VM_LAYOUT_##name)
#define STAX_VM_TABLE_ENTRY_(name, element_size, layout) \
  STAX_VM_TABLE_ENTRY_2_(name, element_size, layout)
#define STAX_VM_TABLE_ENTRY_2_(name, element_size, storage, fields, field_count)          \
  {#name, storage, element_size, offsetof(stax_program_t, name),                          \
   offsetof(stax_program_t, name##_count), offsetof(stax_program_t, capacity.name), fields, \
   field_count},

const stax_vm_file_table_t stax_vm_file_tables[] = {STAX_VM_PROGRAM_TABLES(STAX_VM_TABLE_ENTRY)};
const int32_t stax_vm_file_table_count =
    (int32_t)(sizeof(stax_vm_file_tables) / sizeof(stax_vm_file_tables[0]));

int32_t stax_vm_file_record_size(const stax_vm_file_table_t* table) {
  int32_t size = 0;
  for (int32_t f = 0; f < table->field_count; f++) size += table->fields[f].size;
  return size;
}

/* ---- fingerprint and checksum ---------------------------------------------------------------- */

static uint64_t stax_vm_hash_text(uint64_t h, const char* text) {
  return stax_hash_bytes(text, strlen(text) + 1, h); /* the terminator separates names */
}

uint64_t stax_vm_isa_fingerprint(void) { return stax_vm_isa_fingerprint_for(STAX_VM_FILE_VERSION); }

uint64_t stax_vm_isa_fingerprint_for(uint32_t version) {
  /* Version 2 had every dim-code op but BCAST (the last one). */
  int32_t dim_code_ops = version >= 3 ? STAX_DIM_CODE_OP_COUNT : STAX_DIM_CODE_BCAST;
  uint64_t h = stax_hash_u64(version);
  for (int32_t opcode = 0; opcode < STAX_VM_OPCODE_COUNT; opcode++) {
    h = stax_vm_hash_text(h, stax_vm_opcode_name(opcode));
    h = stax_vm_hash_text(h, stax_vm_opcode_format(opcode));
  }
  for (int32_t op = 0; op < STAX_OP_COUNT; op++)
    h = stax_vm_hash_text(h, stax_op_name((stax_op_t)op));
  for (int32_t dtype = 0; dtype < STAX_DTYPE_COUNT; dtype++) {
    h = stax_vm_hash_text(h, stax_dtype_name((stax_dtype_t)dtype));
    h = stax_hash_combine(h, stax_dtype_size((stax_dtype_t)dtype));
  }
  for (int32_t type = STAX_ATTR_INT; type <= STAX_ATTR_GRAPH; type++)
    h = stax_vm_hash_text(h, stax_attr_type_name((stax_attr_type_t)type));
  h = stax_hash_combine(h, (uint64_t)dim_code_ops);
  h = stax_hash_combine(h, STAX_MAX_RANK);
  return h;
}

uint64_t stax_vm_file_checksum(const uint8_t* header, const uint8_t* payload, size_t size) {
  uint64_t seed = stax_hash_bytes(header, 32, 0x5354415850524f47ull /* "STAXPROG" */);
  return stax_hash_bytes(payload, size, seed);
}

/* ---- writer ---------------------------------------------------------------------------------- */

/* A growing byte buffer whose first failure sticks, so the encoders below stay linear. */
typedef struct stax_vm_writer_t {
  stax_allocator_t allocator;
  uint8_t* data;
  size_t size;
  size_t capacity;
  stax_status_t status;
} stax_vm_writer_t;

static uint8_t* stax_vm_writer_reserve(stax_vm_writer_t* w, size_t bytes) {
  if (w->status) return NULL;
  if (bytes > SIZE_MAX / 2 - w->size) {
    w->status = stax_status_make(STAX_OUT_OF_RANGE, "program file exceeds %zu bytes", SIZE_MAX / 2);
    return NULL;
  }
  if (w->size + bytes > w->capacity) {
    size_t grown = w->capacity ? w->capacity : 4096;
    while (grown < w->size + bytes) grown *= 2;
    void* data = w->data;
    w->status = data ? stax_allocator_realloc(w->allocator, w->capacity, grown, &data)
                     : stax_allocator_malloc(w->allocator, grown, &data);
    if (w->status) return NULL;
    w->data = data;
    w->capacity = grown;
  }
  uint8_t* at = w->data + w->size;
  w->size += bytes;
  return at;
}

static void stax_vm_store_le(uint8_t* at, uint64_t value, size_t size) {
  for (size_t b = 0; b < size; b++) at[b] = (uint8_t)(value >> (8 * b));
}

static void stax_vm_put_le(stax_vm_writer_t* w, uint64_t value, size_t size) {
  uint8_t* at = stax_vm_writer_reserve(w, size);
  if (at) stax_vm_store_le(at, value, size);
}

/* A value of `size` bytes (1, 2, 4 or 8) in host order at `source`. */
static uint64_t stax_vm_load_host(const void* source, size_t size) {
  switch (size) {
    case 1: { uint8_t v; memcpy(&v, source, 1); return v; }
    case 2: { uint16_t v; memcpy(&v, source, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, source, 4); return v; }
    default: { uint64_t v; memcpy(&v, source, 8); return v; }
  }
}

/* Elements of `size` bytes, little-endian on disk. */
static void stax_vm_put_elements(stax_vm_writer_t* w, const void* data, int64_t count,
                                 size_t size) {
  if (count <= 0) return;
  uint8_t* at = stax_vm_writer_reserve(w, (size_t)count * size);
  if (!at) return;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  memcpy(at, data, (size_t)count * size);
#else
  const uint8_t* source = data;
  for (int64_t k = 0; k < count; k++)
    stax_vm_store_le(at + (size_t)k * size, stax_vm_load_host(source + (size_t)k * size, size),
                     size);
#endif
}

/* Starts a section: tag and a length patched by stax_vm_end_section. */
static size_t stax_vm_begin_section(stax_vm_writer_t* w, int32_t tag) {
  stax_vm_put_le(w, (uint32_t)tag, 4);
  size_t length_at = w->size;
  stax_vm_put_le(w, 0, 8);
  return length_at;
}

static void stax_vm_end_section(stax_vm_writer_t* w, size_t length_at) {
  if (w->status) return;
  stax_vm_store_le(w->data + length_at, w->size - length_at - 8, 8);
}

static void stax_vm_put_records(stax_vm_writer_t* w, const stax_program_t* program,
                                const stax_vm_file_table_t* table) {
  const char* base = *(const char* const*)((const char*)program + table->data_offset);
  int32_t count = *(const int32_t*)((const char*)program + table->count_offset);
  int32_t record_size = stax_vm_file_record_size(table);
  stax_vm_put_le(w, (uint32_t)count, 4);
  stax_vm_put_le(w, (uint32_t)record_size, 4);
  if (table->field_count == 1 && table->fields[0].offset == 0 &&
      (size_t)table->fields[0].size == table->element_size) {
    stax_vm_put_elements(w, base, count, table->element_size); /* a table of scalars */
    return;
  }
  uint8_t* at = stax_vm_writer_reserve(w, (size_t)count * (size_t)record_size);
  if (!at) return;
  for (int32_t r = 0; r < count; r++) {
    const char* record = base + (size_t)r * table->element_size;
    for (int32_t f = 0; f < table->field_count; f++) {
      const stax_vm_file_field_t* field = &table->fields[f];
      stax_vm_store_le(at, stax_vm_load_host(record + field->offset, field->size), field->size);
      at += field->size;
    }
  }
}

static void stax_vm_put_constant(stax_vm_writer_t* w, const stax_tensor_t* tensor) {
  stax_dtype_t dtype = stax_tensor_dtype(tensor);
  int32_t rank = stax_tensor_rank(tensor);
  int64_t count = stax_tensor_element_count(tensor);
  size_t element_size = stax_dtype_size(dtype);
  stax_vm_put_le(w, (uint32_t)dtype, 4);
  stax_vm_put_le(w, (uint32_t)rank, 4);
  for (int32_t d = 0; d < rank; d++) stax_vm_put_le(w, (uint64_t)stax_tensor_dims(tensor)[d], 8);
  stax_vm_put_le(w, (uint64_t)count * element_size, 8);
  if (w->status || count == 0) return;
  if (stax_tensor_is_contiguous(tensor)) {
    stax_vm_put_elements(w, stax_tensor_data(tensor), count, element_size);
    return;
  }
  /* A strided or broadcast view (a folded Transpose or Expand): row-major copy first. */
  stax_tensor_t* copy = NULL;
  w->status = stax_tensor_create(w->allocator, dtype, rank, stax_tensor_dims(tensor), &copy);
  if (w->status == STAX_OK) w->status = stax_tensor_copy_into(tensor, copy);
  if (w->status == STAX_OK) stax_vm_put_elements(w, stax_tensor_data(copy), count, element_size);
  if (copy) stax_tensor_release(copy);
}

stax_status_t stax_program_serialize(const stax_program_t* program, stax_allocator_t allocator,
                                     void** out_data, size_t* out_size) {
  if (out_data) *out_data = NULL;
  if (out_size) *out_size = 0;
  if (!program || !out_data || !out_size)
    return stax_status_make(STAX_INVALID_ARGUMENT,
                            "stax_program_serialize: program, out_data or out_size is NULL");
  if (!program->linked)
    return stax_status_make(STAX_FAILED_PRECONDITION,
                            "stax_program_serialize: the program was not finalized");
  stax_vm_writer_t w = {.allocator = allocator};
  uint8_t* header = stax_vm_writer_reserve(&w, STAX_VM_FILE_HEADER_SIZE);
  if (header) memset(header, 0, STAX_VM_FILE_HEADER_SIZE);
  for (int32_t t = 0; t < stax_vm_file_table_count; t++) {
    const stax_vm_file_table_t* table = &stax_vm_file_tables[t];
    if (table->storage == STAX_VM_FILE_NOT_STORED) continue;
    size_t length_at = stax_vm_begin_section(&w, t + 1);
    if (table->storage == STAX_VM_FILE_RECORDS) {
      stax_vm_put_records(&w, program, table);
    } else {
      stax_vm_put_le(&w, (uint32_t)program->constants_count, 4);
      for (int32_t c = 0; c < program->constants_count; c++)
        stax_vm_put_constant(&w, program->constants[c]);
    }
    stax_vm_end_section(&w, length_at);
  }
  if (w.status) {
    if (w.data) stax_allocator_free(allocator, w.data, w.capacity);
    return stax_status_annotate(w.status, "serializing the program");
  }
  header = w.data;
  memcpy(header, STAX_VM_FILE_MAGIC, 8);
  stax_vm_store_le(header + 8, STAX_VM_FILE_VERSION, 4);
  stax_vm_store_le(header + 12, STAX_VM_FILE_BYTE_ORDER, 4);
  stax_vm_store_le(header + 16, stax_vm_isa_fingerprint(), 8);
  size_t payload = w.size - STAX_VM_FILE_HEADER_SIZE;
  stax_vm_store_le(header + 24, payload, 8);
  stax_vm_store_le(header + 32,
                   stax_vm_file_checksum(header, header + STAX_VM_FILE_HEADER_SIZE, payload), 8);
  /* Hand back exactly `size` bytes, so the caller frees with the size it was given. */
  if (w.capacity != w.size) {
    void* data = w.data;
    stax_status_t status = stax_allocator_realloc(allocator, w.capacity, w.size, &data);
    if (status) {
      stax_allocator_free(allocator, w.data, w.capacity);
      return stax_status_annotate(status, "serializing the program");
    }
    w.data = data;
  }
  *out_data = w.data;
  *out_size = w.size;
  return STAX_OK;
}

stax_status_t stax_program_save(const stax_program_t* program, const char* path) {
  if (!path) return stax_status_make(STAX_INVALID_ARGUMENT, "stax_program_save: path is NULL");
  stax_allocator_t allocator = stax_allocator_system();
  void* data = NULL;
  size_t size = 0;
  STAX_RETURN_IF_ERROR(stax_program_serialize(program, allocator, &data, &size),
                       "saving '%s'", path);
  stax_status_t status = STAX_OK;
  FILE* file = fopen(path, "wb");
  if (!file) {
    status = stax_status_make(STAX_IO_ERROR, "cannot create '%s': %s", path, strerror(errno));
  } else {
    bool written = fwrite(data, 1, size, file) == size;
    int saved_errno = errno;
    bool closed = fclose(file) == 0;
    if (!written || !closed) {
      status = stax_status_make(STAX_IO_ERROR, "writing '%s' failed: %s", path,
                                strerror(written ? errno : saved_errno));
      remove(path); /* no half-written program file left behind */
    }
  }
  stax_allocator_free(allocator, data, size);
  return status;
}
