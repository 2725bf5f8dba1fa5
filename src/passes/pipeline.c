/* The pass pipeline stax_program_compile runs: the passes of passes.def in order, over the
 * top-level graph and every subgraph, repeated until a round changes nothing (at most
 * STAX_PIPELINE_MAX_ROUNDS), with a log of what each run did. */
#include "passes/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/pass.h"

#define STAX_PIPELINE_MAX_ROUNDS 8

static const char* const kPassNames[] = {
#define STAX_PASS(name, summary) #name,
#include "stax/passes.def"
#undef STAX_PASS
};
static const char* const kPassSummaries[] = {
#define STAX_PASS(name, summary) summary,
#include "stax/passes.def"
#undef STAX_PASS
};
typedef stax_status_t (*stax_pass_fn)(stax_pass_ctx_t* ctx);
static const stax_pass_fn kPassFns[] = {
#define STAX_PASS(name, summary) stax_pass_run_##name,
#include "stax/passes.def"
#undef STAX_PASS
};

const char* stax_pass_name(stax_pass_t pass) {
  return pass >= 0 && pass < STAX_PASS_COUNT ? kPassNames[pass] : "invalid";
}

const char* stax_pass_summary(stax_pass_t pass) {
  return pass >= 0 && pass < STAX_PASS_COUNT ? kPassSummaries[pass] : "";
}

stax_pass_t stax_pass_from_name(const char* name) {
  if (!name) return STAX_PASS_INVALID;
  for (int32_t p = 0; p < STAX_PASS_COUNT; p++)
    if (strcmp(kPassNames[p], name) == 0) return (stax_pass_t)p;
  return STAX_PASS_INVALID;
}

stax_status_t stax_pass_parse_list(const char* list, uint32_t* out_bits) {
  if (!out_bits)
    return stax_status_make(STAX_INVALID_ARGUMENT, "stax_pass_parse_list: out_bits is NULL");
  *out_bits = 0;
  if (!list) return STAX_OK;
  uint32_t bits = 0;
  const char* at = list;
  while (*at) {
    const char* end = strchr(at, ',');
    size_t length = end ? (size_t)(end - at) : strlen(at);
    while (length > 0 && (*at == ' ')) at++, length--;
    while (length > 0 && at[length - 1] == ' ') length--;
    char name[32];
    if (length >= sizeof(name)) length = sizeof(name) - 1;
    memcpy(name, at, length);
    name[length] = '\0';
    if (length == 0) {
      /* empty entries ("", "a,,b") name nothing */
    } else if (strcmp(name, "all") == 0) {
      bits |= STAX_PASSES_ALL;
    } else {
      stax_pass_t pass = stax_pass_from_name(name);
      if (pass == STAX_PASS_INVALID) {
        char known[256];
        int used = 0;
        for (int32_t p = 0; p < STAX_PASS_COUNT && used < (int)sizeof(known); p++)
          used += snprintf(known + used, sizeof(known) - (size_t)used, "%s%s", p ? ", " : "",
                           kPassNames[p]);
        return stax_status_make(STAX_INVALID_ARGUMENT,
                                "unknown graph pass '%s' (the passes are %s, or all)", name, known);
      }
      bits |= STAX_PASS_BIT(pass);
    }
    if (!end) break;
    at = end + 1;
  }
  *out_bits = bits;
  return STAX_OK;
}

/* ---- the log ------------------------------------------------------------------------------- */

void stax_pass_log_free(stax_pass_log_t* log) {
  if (!log) return;
  for (int32_t k = 0; k < log->count; k++)
    if (log->entries[k].detail)
      stax_allocator_free(log->allocator, (void*)log->entries[k].detail,
                          strlen(log->entries[k].detail) + 1);
  if (log->entries)
    stax_allocator_free(log->allocator, log->entries,
                        (size_t)log->capacity * sizeof(log->entries[0]));
  stax_allocator_free(log->allocator, log, sizeof(*log));
}

static stax_status_t stax_pass_log_add(stax_pass_log_t* log, const stax_pass_report_t* entry,
                                       const stax_pass_tally_t* tally) {
  if (log->count == log->capacity) {
    int32_t capacity = log->capacity ? log->capacity * 2 : 16;
    void* grown = NULL;
    STAX_RETURN_IF_ERROR(stax_allocator_malloc(log->allocator,
                                               (size_t)capacity * sizeof(log->entries[0]), &grown));
    if (log->entries) {
      memcpy(grown, log->entries, (size_t)log->count * sizeof(log->entries[0]));
      stax_allocator_free(log->allocator, log->entries,
                          (size_t)log->capacity * sizeof(log->entries[0]));
    }
    log->entries = grown;
    log->capacity = capacity;
  }
  char text[512];
  int used = 0;
  text[0] = '\0';
  for (int32_t k = 0; k < STAX_PASS_TALLY_MAX && tally->label[k]; k++) {
    if (used >= (int)sizeof(text)) break;
    used += snprintf(text + used, sizeof(text) - (size_t)used, "%s%d %s", k ? ", " : "",
                     tally->count[k], tally->label[k]);
  }
  size_t length = strlen(text) + 1;
  char* detail = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(log->allocator, length, (void**)&detail));
  memcpy(detail, text, length);
  log->entries[log->count] = *entry;
  log->entries[log->count].detail = detail;
  log->count++;
  return STAX_OK;
}

/* ---- running ------------------------------------------------------------------------------- */

static int32_t stax_pipeline_node_count(const stax_graph_t* graph) {
  int32_t count = graph->node_count;
  for (stax_node_id_t n = 0; n < graph->node_count; n++) {
    const stax_node_t* node = &graph->nodes[n];
    for (int32_t a = 0; a < node->attr_count; a++)
      if (node->attrs[a].type == STAX_ATTR_GRAPH && node->attrs[a].value.graph)
        count += stax_pipeline_node_count(node->attrs[a].value.graph);
  }
  return count;
}

/* Runs one pass over `graph` and then its subgraphs, adding up changes into *tally. */
static stax_status_t stax_pipeline_run_pass(stax_graph_t* graph, stax_pass_t pass,
                                            stax_pass_tally_t* tally, int32_t* changes) {
  stax_pass_ctx_t ctx;
  STAX_RETURN_IF_ERROR(stax_pass_ctx_init(&ctx, graph));
  stax_status_t status = kPassFns[pass](&ctx);
  if (status == STAX_OK) stax_pass_compact(&ctx);
  *changes += ctx.changes;
  for (int32_t k = 0; k < STAX_PASS_TALLY_MAX && ctx.tally.label[k]; k++)
    stax_pass_tally_add(tally, ctx.tally.label[k], ctx.tally.count[k]);
  stax_pass_ctx_deinit(&ctx);
  if (status != STAX_OK) return status;
  for (stax_node_id_t n = 0; n < graph->node_count; n++) {
    stax_node_t* node = &graph->nodes[n];
    for (int32_t a = 0; a < node->attr_count; a++)
      if (node->attrs[a].type == STAX_ATTR_GRAPH && node->attrs[a].value.graph)
        STAX_RETURN_IF_ERROR(
            stax_pipeline_run_pass(node->attrs[a].value.graph, pass, tally, changes),
            "in attribute '%s' of %s node '%s'", node->attrs[a].name, stax_op_name(node->op),
            node->name);
  }
  return STAX_OK;
}

uint32_t stax_pipeline_env_disabled(void) {
  const char* env = getenv("STAX_DISABLE_PASSES");
  if (!env || !*env) return 0;
  uint32_t bits = 0;
  stax_status_t status = stax_pass_parse_list(env, &bits);
  if (status != STAX_OK) {
    static _Atomic int warned = 0;
    if (!warned++)
      fprintf(stderr, "stax: STAX_DISABLE_PASSES ignored: %s\n", stax_status_message(status));
    stax_status_free(status);
    return 0;
  }
  return bits;
}

stax_status_t stax_pipeline_run(stax_allocator_t allocator, stax_graph_t* graph, uint32_t disabled,
                                stax_pass_log_t** out_log) {
  *out_log = NULL;
  stax_pass_log_t* log = NULL;
  STAX_RETURN_IF_ERROR(stax_allocator_malloc(allocator, sizeof(*log), (void**)&log));
  memset(log, 0, sizeof(*log));
  log->allocator = allocator;
  log->nodes_before = stax_pipeline_node_count(graph);
  stax_status_t status = STAX_OK;
  for (int32_t round = 1; round <= STAX_PIPELINE_MAX_ROUNDS; round++) {
    int32_t round_changes = 0;
    log->rounds = round;
    for (int32_t p = 0; p < STAX_PASS_COUNT; p++) {
      if (disabled & STAX_PASS_BIT(p)) continue;
      stax_pass_tally_t tally;
      memset(&tally, 0, sizeof(tally));
      int32_t changes = 0;
      stax_pass_report_t entry = {.pass = (stax_pass_t)p, .round = round,
                                  .nodes_before = stax_pipeline_node_count(graph)};
      STAX_GOTO_IF_ERROR(status, stax_pipeline_run_pass(graph, (stax_pass_t)p, &tally, &changes),
                         fail, "graph pass '%s'", kPassNames[p]);
      if (changes == 0) continue;
      entry.nodes_after = stax_pipeline_node_count(graph);
      entry.rewrites = changes;
      round_changes += changes;
      STAX_GOTO_IF_ERROR(status, stax_pass_log_add(log, &entry, &tally), fail);
      STAX_LOG(PASS, "round %d %s: %d -> %d nodes: %s", round, kPassNames[p], entry.nodes_before,
               entry.nodes_after, log->entries[log->count - 1].detail);
    }
    if (round_changes == 0) break;
  }
  log->nodes_after = stax_pipeline_node_count(graph);
  *out_log = log;
  return STAX_OK;
fail:
  stax_pass_log_free(log);
  return status;
}
