#include "params.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct bind_ctx {
  const mr_gadget_class *cls;
  const char *config; /* NULL: binding the class's defaults (the line is the bare reason) */
  int index;
  mr_err *err;
} bind_ctx;

static int bad(const bind_ctx *b, const mr_param *p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(const bind_ctx *b, const mr_param *p, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (b->config == NULL)
    return mr_err_set(b->err, MR_ECONFIG, "%s", what);
  return mr_err_set(b->err, MR_ECONFIG, "config '%s', gadget %d '%s', key '%s': %s",
                    b->config, b->index, b->cls->name, p->name, what);
}

static const char *type_name(mr_param_type t) {
  switch (t) {
  case MR_PARAM_TYPE_BOOL:
    return "bool";
  case MR_PARAM_TYPE_INT:
    return "integer";
  case MR_PARAM_TYPE_DOUBLE:
    return "number";
  case MR_PARAM_TYPE_ENUM:
    return "string";
  case MR_PARAM_TYPE_INTS:
    return "integer array";
  case MR_PARAM_TYPE_DEVICE:
    return "device";
  case MR_PARAM_TYPE_TEXT:
    return "text";
  }
  return "?";
}

/* Is `word` one of the '|'-separated choices? Returns its index or -1. */
static int choice_index(const char *choices, const char *word) {
  int i = 0;
  size_t n = strlen(word);
  for (const char *c = choices; *c != '\0'; i++) {
    const char *bar = strchr(c, '|');
    size_t len = bar != NULL ? (size_t)(bar - c) : strlen(c);
    if (len == n && strncmp(c, word, n) == 0)
      return i;
    if (bar == NULL)
      break;
    c = bar + 1;
  }
  return -1;
}

static int read_int(const bind_ctx *b, const mr_param *p, const cJSON *v, int *out) {
  if (!cJSON_IsNumber(v))
    return bad(b, p, "expected an integer");
  double d = v->valuedouble;
  if (d != floor(d))
    return bad(b, p, "expected an integer, got %g", d);
  if (d < p->min || d > p->max)
    return bad(b, p, "%g is outside %g..%g", d, p->min, p->max);
  *out = (int)d;
  return 0;
}

static int bind_one(const bind_ctx *b, const mr_param *p, const cJSON *v, void *state) {
  void *dst = (char *)state + p->offset;
  switch (p->type) {
  case MR_PARAM_TYPE_BOOL:
    if (!cJSON_IsBool(v))
      return bad(b, p, "expected true or false");
    *(int *)dst = cJSON_IsTrue(v);
    return 0;
  case MR_PARAM_TYPE_INT:
    return read_int(b, p, v, dst);
  case MR_PARAM_TYPE_DOUBLE: {
    if (!cJSON_IsNumber(v))
      return bad(b, p, "expected a number");
    double d = v->valuedouble;
    if (!isfinite(d) || d < p->min || d > p->max)
      return bad(b, p, "%g is outside %g..%g", d, p->min, p->max);
    *(double *)dst = d;
    return 0;
  }
  case MR_PARAM_TYPE_ENUM: {
    int i = cJSON_IsString(v) ? choice_index(p->choices, v->valuestring) : -1;
    if (i < 0)
      return bad(b, p, "expected one of %s", p->choices);
    *(int *)dst = i;
    return 0;
  }
  case MR_PARAM_TYPE_INTS: {
    if (!cJSON_IsArray(v) || (size_t)cJSON_GetArraySize(v) != p->count)
      return bad(b, p, "expected an array of %zu integers", p->count);
    int *out = dst, i = 0;
    for (const cJSON *e = v->child; e != NULL; e = e->next, i++)
      if (read_int(b, p, e, &out[i]) < 0)
        return MR_ECONFIG;
    return 0;
  }
  case MR_PARAM_TYPE_DEVICE:
    if (cJSON_IsString(v) && strcmp(v->valuestring, "auto") == 0) {
      *(int *)dst = MR_PARAM_DEVICE_AUTO;
      return 0;
    }
    if (cJSON_IsString(v) && strcmp(v->valuestring, "cpu") == 0) {
      *(int *)dst = MR_PARAM_DEVICE_CPU;
      return 0;
    }
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 1024 &&
        v->valuedouble == floor(v->valuedouble)) {
      *(int *)dst = (int)v->valuedouble;
      return 0;
    }
    return bad(b, p, "expected \"auto\", \"cpu\" or a GPU index");
  case MR_PARAM_TYPE_TEXT:
    if (!cJSON_IsString(v))
      return bad(b, p, "expected a string");
    if (strlen(v->valuestring) >= p->count)
      return bad(b, p, "longer than %zu bytes", p->count - 1);
    strcpy(dst, v->valuestring);
    return 0;
  }
  return bad(b, p, "unknown parameter type");
}

static const mr_param *find(const mr_gadget_class *cls, const char *key) {
  for (size_t i = 0; i < cls->nparams; i++)
    if (strcmp(cls->params[i].name, key) == 0)
      return &cls->params[i];
  return NULL;
}

/* Bytes a parameter's value takes in the state. */
static size_t value_bytes(const mr_param *p) {
  switch (p->type) {
  case MR_PARAM_TYPE_DOUBLE:
    return sizeof(double);
  case MR_PARAM_TYPE_INTS:
    return p->count * sizeof(int);
  case MR_PARAM_TYPE_TEXT:
    return p->count;
  default:
    return sizeof(int);
  }
}

/* A class's defaults, bound once into an image of its state: every chain
 * build used to parse each default's JSON text again. Made on a class's
 * first bind, kept for the life of the process (one per class). */
typedef struct defaults {
  struct defaults *next;
  const mr_gadget_class *cls;
  mr_err err;            /* code 0, or why a default does not bind (a bug in the table) */
  unsigned char *image;  /* state_size bytes, aligned as the state; only the parameters'
                            values are meaningful */
} defaults;

static pthread_mutex_t defaults_mu = PTHREAD_MUTEX_INITIALIZER;
static defaults *defaults_made;

static defaults *defaults_make(const mr_gadget_class *cls) {
  defaults *d = calloc(1, sizeof *d);
  if (d == NULL || (d->image = calloc(1, cls->state_size > 0 ? cls->state_size : 1)) == NULL) {
    free(d);
    return NULL;
  }
  d->cls = cls;
  mr_err why = {0};
  bind_ctx b = {cls, NULL, 0, &why};
  for (size_t i = 0; i < cls->nparams && d->err.code == 0; i++) {
    const mr_param *p = &cls->params[i];
    cJSON *def = cJSON_Parse(p->def);
    if (def == NULL || bind_one(&b, p, def, d->image) < 0)
      mr_err_set(&d->err, MR_EINVAL, "gadget '%s': the default of '%s' (%s): %s", cls->name,
                 p->name, p->def, def == NULL ? "not JSON" : why.msg);
    cJSON_Delete(def);
  }
  return d;
}

/* The class's defaults, made on first use. Any thread. NULL: out of memory. */
static const defaults *defaults_of(const mr_gadget_class *cls) {
  pthread_mutex_lock(&defaults_mu);
  defaults *d = defaults_made;
  while (d != NULL && d->cls != cls)
    d = d->next;
  if (d == NULL && (d = defaults_make(cls)) != NULL) {
    d->next = defaults_made;
    defaults_made = d;
  }
  pthread_mutex_unlock(&defaults_mu);
  return d;
}

int mr_params_bind(const mr_gadget_class *cls, const cJSON *entry, void *state,
                   const char *config, int index, mr_err *err) {
  bind_ctx b = {cls, config, index, err};
  const defaults *d = defaults_of(cls);
  if (d == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory building config '%s'", config);
  if (d->err.code != 0) {
    *err = d->err;
    return d->err.code;
  }
  for (size_t i = 0; i < cls->nparams; i++) {
    const mr_param *p = &cls->params[i];
    memcpy((char *)state + p->offset, d->image + p->offset, value_bytes(p));
  }
  if (entry == NULL)
    return 0;
  if (!cJSON_IsObject(entry))
    return mr_err_set(err, MR_ECONFIG, "config '%s', gadget %d: expected a JSON object",
                      config, index);
  for (const cJSON *kv = entry->child; kv != NULL; kv = kv->next) {
    if (strcmp(kv->string, MR_PARAM_KEY_GADGET) == 0 ||
        strcmp(kv->string, MR_PARAM_KEY_COMMENT) == 0)
      continue;
    const mr_param *p = find(cls, kv->string);
    if (p == NULL)
      return mr_err_set(err, MR_ECONFIG,
                        "config '%s', gadget %d '%s': unknown key '%s' (see reconserver --describe)",
                        config, index, cls->name, kv->string);
    if (bind_one(&b, p, kv, state) < 0)
      return MR_ECONFIG;
  }
  return 0;
}

void mr_params_describe(const mr_gadget_class *cls, FILE *out) {
  fprintf(out, "%s\n  %s\n", cls->name, cls->summary);
  for (size_t i = 0; i < cls->nparams; i++) {
    const mr_param *p = &cls->params[i];
    fprintf(out, "  %-18s %-14s default %-10s", p->name, type_name(p->type), p->def);
    if (p->type == MR_PARAM_TYPE_ENUM)
      fprintf(out, " one of %s", p->choices);
    else if (p->type == MR_PARAM_TYPE_INT || p->type == MR_PARAM_TYPE_DOUBLE ||
             p->type == MR_PARAM_TYPE_INTS)
      fprintf(out, " range %g..%g", p->min, p->max);
    else if (p->type == MR_PARAM_TYPE_DEVICE)
      fprintf(out, " \"auto\", \"cpu\" or a GPU index");
    else if (p->type == MR_PARAM_TYPE_TEXT)
      fprintf(out, " at most %zu bytes", p->count - 1);
    fprintf(out, "\n  %-18s %s\n", "", p->help);
  }
}
