#include "query.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "escape.h"
#include "net.h"
#include "stream.h"

typedef struct asking {
  const char *const *keys;
  size_t n, next;
  char **answers;
} asking;

static int next_query(void *ctx, mr_message **out, mr_err *err) {
  asking *a = ctx;
  *out = NULL;
  if (a->next == a->n)
    return 0;
  const char *key = a->keys[a->next];
  *out = mr_message_new_query(MR_MSG_QUERY, a->next, key, strlen(key));
  a->next++;
  return *out != NULL ? 0 : mr_err_set(err, MR_ENOMEM, "out of memory");
}

static int on_answer(void *ctx, const mr_message *m, mr_err *err) {
  asking *a = ctx;
  if (m->kind != MR_MSG_RESPONSE)
    return mr_err_set(err, MR_EPROTO, "protocol violation: the server sent %s to a query",
                      mr_message_kind_name(m->kind));
  uint64_t id = m->u.query.correlation_id;
  if (id >= a->n || a->answers[id] != NULL)
    return mr_err_set(err, MR_EPROTO,
                      "protocol violation: a RESPONSE with correlation id %llu, which was %s",
                      (unsigned long long)id, id >= a->n ? "never asked" : "already answered");
  a->answers[id] = strdup(m->u.query.text);
  return a->answers[id] != NULL ? 0 : mr_err_set(err, MR_ENOMEM, "out of memory");
}

int mr_query_ask(const char *host, int port, int timeout_ms, const char *const *keys, size_t n,
                 char **answers, mr_err *err) {
  for (size_t i = 0; i < n; i++)
    answers[i] = NULL;
  mr_net net;
  int rc = mr_net_connect(&net, host, port, timeout_ms, err);
  if (rc < 0)
    return rc;
  asking a = {.keys = keys, .n = n, .answers = answers};
  mr_stream_source src = {.next = next_query, .ctx = &a};
  mr_stream_sink sink = {.on_message = on_answer, .ctx = &a};
  mr_stream_result res;
  rc = mr_stream_run(&net, &src, &sink, NULL, &res, err);
  mr_net_close(&net);
  if (rc < 0)
    return rc;
  if (res.server_errors > 0)
    return mr_err_set(err, MR_EPROTO, "the server reported an error: %s", res.first_error);
  for (size_t i = 0; i < n; i++)
    if (answers[i] == NULL)
      return mr_err_set(err, MR_EPROTO, "the server closed without answering QUERY '%s'",
                        keys[i]);
  return 0;
}

static const char *string_of(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A string of the server's, escaped: it must not drive the terminal. */
static void shown(FILE *out, const char *s) {
  mr_escape_write(out, s, strlen(s), MR_ESCAPE_KEEP_UTF8);
}

int mr_query_print_configs(const char *json, FILE *out, mr_err *err) {
  cJSON *root = cJSON_Parse(json);
  if (!cJSON_IsArray(root)) {
    cJSON_Delete(root);
    return mr_err_set(err, MR_EPROTO, "the server's config list is not a JSON array");
  }
  const cJSON *cfg;
  cJSON_ArrayForEach(cfg, root) {
    const char *name = string_of(cfg, "name"), *desc = string_of(cfg, "description");
    shown(out, name != NULL ? name : "(unnamed)");
    const cJSON *aliases = cJSON_GetObjectItemCaseSensitive(cfg, "aliases"), *alias;
    int first = 1;
    cJSON_ArrayForEach(alias, aliases) {
      if (cJSON_IsString(alias)) {
        fputs(first ? "  (also: " : ", ", out);
        shown(out, alias->valuestring);
        first = 0;
      }
    }
    fprintf(out, "%s\n", first ? "" : ")");
    if (desc != NULL && desc[0] != '\0') {
      fputs("    ", out);
      shown(out, desc);
      fputc('\n', out);
    }
  }
  cJSON_Delete(root);
  return 0;
}
