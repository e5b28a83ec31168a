#include "pipeline_config.h"

#include <stdlib.h>
#include <string.h>

#include "chain.h"

static char *dup_string(const cJSON *v) {
  return cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
}

static int check_shape(const cJSON *doc, const char *origin, mr_err *err) {
  if (!cJSON_IsObject(doc))
    return mr_err_set(err, MR_ECONFIG, "config %s: expected a JSON object", origin);
  for (const cJSON *kv = doc->child; kv != NULL; kv = kv->next) {
    const char *k = kv->string;
    if (strcmp(k, "name") != 0 && strcmp(k, "aliases") != 0 &&
        strcmp(k, "description") != 0 && strcmp(k, "gadgets") != 0 &&
        strcmp(k, "priority") != 0)
      return mr_err_set(err, MR_ECONFIG, "config %s: unknown key '%s'", origin, k);
  }
  const cJSON *priority = cJSON_GetObjectItemCaseSensitive(doc, "priority");
  if (priority != NULL && !(cJSON_IsString(priority) &&
                            (strcmp(priority->valuestring, "realtime") == 0 ||
                             strcmp(priority->valuestring, "normal") == 0)))
    return mr_err_set(err, MR_ECONFIG, "config %s: 'priority' is \"realtime\" or \"normal\"",
                      origin);
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(doc, "name");
  if (!cJSON_IsString(name) || name->valuestring[0] == '\0')
    return mr_err_set(err, MR_ECONFIG, "config %s: 'name' must be a non-empty string",
                      origin);
  const cJSON *desc = cJSON_GetObjectItemCaseSensitive(doc, "description");
  if (desc != NULL && !cJSON_IsString(desc))
    return mr_err_set(err, MR_ECONFIG, "config %s: 'description' must be a string", origin);
  const cJSON *aliases = cJSON_GetObjectItemCaseSensitive(doc, "aliases");
  if (aliases != NULL) {
    if (!cJSON_IsArray(aliases))
      return mr_err_set(err, MR_ECONFIG, "config %s: 'aliases' must be an array of strings",
                        origin);
    for (const cJSON *a = aliases->child; a != NULL; a = a->next)
      if (!cJSON_IsString(a) || a->valuestring[0] == '\0')
        return mr_err_set(err, MR_ECONFIG,
                          "config %s: 'aliases' must be an array of non-empty strings",
                          origin);
  }
  const cJSON *gadgets = cJSON_GetObjectItemCaseSensitive(doc, "gadgets");
  if (!cJSON_IsArray(gadgets) || cJSON_GetArraySize(gadgets) == 0)
    return mr_err_set(err, MR_ECONFIG, "config %s: 'gadgets' must be a non-empty array",
                      origin);
  return 0;
}

int mr_pipeline_config_parse(const char *text, size_t len, const char *origin,
                             mr_pipeline_config **out, mr_err *err) {
  const char *end = NULL;
  cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (doc == NULL) {
    size_t at = end != NULL && end >= text ? (size_t)(end - text) : 0;
    return mr_err_set(err, MR_ECONFIG, "config %s: not valid JSON (near byte %zu)",
                      origin, at);
  }
  int rc = check_shape(doc, origin, err);
  if (rc < 0) {
    cJSON_Delete(doc);
    return rc;
  }
  mr_pipeline_config *cfg = calloc(1, sizeof *cfg);
  if (cfg == NULL) {
    cJSON_Delete(doc);
    return mr_err_set(err, MR_ENOMEM, "out of memory reading config %s", origin);
  }
  cfg->doc = doc;
  cfg->gadgets = cJSON_GetObjectItemCaseSensitive(doc, "gadgets");
  cfg->name = dup_string(cJSON_GetObjectItemCaseSensitive(doc, "name"));
  const cJSON *priority = cJSON_GetObjectItemCaseSensitive(doc, "priority");
  cfg->realtime = priority != NULL && strcmp(priority->valuestring, "realtime") == 0;
  const cJSON *desc = cJSON_GetObjectItemCaseSensitive(doc, "description");
  cfg->description = desc != NULL ? dup_string(desc) : strdup("");
  const cJSON *aliases = cJSON_GetObjectItemCaseSensitive(doc, "aliases");
  int n = aliases != NULL ? cJSON_GetArraySize(aliases) : 0;
  cfg->aliases = calloc((size_t)n + 1, sizeof *cfg->aliases);
  if (cfg->name == NULL || cfg->description == NULL || cfg->aliases == NULL) {
    mr_pipeline_config_free(cfg);
    return mr_err_set(err, MR_ENOMEM, "out of memory reading config %s", origin);
  }
  for (const cJSON *a = aliases != NULL ? aliases->child : NULL; a != NULL; a = a->next) {
    if ((cfg->aliases[cfg->naliases] = dup_string(a)) == NULL) {
      mr_pipeline_config_free(cfg);
      return mr_err_set(err, MR_ENOMEM, "out of memory reading config %s", origin);
    }
    cfg->naliases++;
  }
  /* Building the chain once binds and checks every parameter now, not
   * when a scanner is waiting. */
  mr_chain *probe = NULL;
  rc = mr_chain_create(cfg, MR_CHAIN_WIRE_INPUT, &probe, err);
  if (rc == 0 && !(mr_chain_produces(probe) & MR_KIND_BIT(MR_MSG_IMAGE)) &&
      !mr_chain_ends_in_sink(probe))
    rc = mr_err_set(err, MR_ECONFIG,
                    "config %s: no gadget produces images (end the chain with image_out, or "
                    "with discard or raw_dump for a chain that answers nothing)", origin);
  mr_chain_destroy(probe);
  if (rc < 0) {
    mr_pipeline_config_free(cfg);
    return rc;
  }
  *out = cfg;
  return 0;
}

void mr_pipeline_config_free(mr_pipeline_config *cfg) {
  if (cfg == NULL)
    return;
  free(cfg->name);
  free(cfg->description);
  for (int i = 0; i < cfg->naliases; i++)
    free(cfg->aliases[i]);
  free(cfg->aliases);
  cJSON_Delete(cfg->doc);
  free(cfg);
}

int mr_pipeline_config_uses(const mr_pipeline_config *cfg, const char *gadget) {
  const cJSON *g;
  cJSON_ArrayForEach(g, cfg->gadgets) {
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(g, "gadget");
    if (cJSON_IsString(cls) && strcmp(cls->valuestring, gadget) == 0)
      return 1;
  }
  return 0;
}

int mr_pipeline_config_matches(const mr_pipeline_config *cfg, const char *name) {
  if (strcmp(cfg->name, name) == 0)
    return 1;
  for (int i = 0; i < cfg->naliases; i++)
    if (strcmp(cfg->aliases[i], name) == 0)
      return 1;
  return 0;
}
