/* A pipeline config: one JSON document from configs/ (or a client's
 * CONFIG_SCRIPT) naming a chain of gadgets.
 *
 *   { "name": "cartesian", "aliases": ["default.xml"],
 *     "description": "...",
 *     "gadgets": [ { "gadget": "accumulate", "trigger": "slice" }, ... ] }
 */
#ifndef MR_GADGETS_PIPELINE_CONFIG_H
#define MR_GADGETS_PIPELINE_CONFIG_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "error.h"

typedef struct mr_pipeline_config {
  char *name;
  char *description;
  char **aliases;
  int naliases;
  cJSON *doc;           /* the whole document (owned) */
  const cJSON *gadgets; /* its "gadgets" array (inside doc) */
  /* "priority": "realtime" (default "normal"): its sessions' GPU work goes
   * to each GPU's real-time lane (gpu/core/device.h), ahead of heavy
   * sessions' work. */
  int realtime;
} mr_pipeline_config;

/* Parses len bytes of JSON. `origin` names the text in errors (a file name
 * or "CONFIG_SCRIPT"). Checks the document's shape and that every gadget
 * exists, binds every parameter and type-checks the chain (by building it
 * once) and that it produces images, so a config that parses here also
 * builds. */
int mr_pipeline_config_parse(const char *text, size_t len, const char *origin,
                             mr_pipeline_config **out, mr_err *err);
void mr_pipeline_config_free(mr_pipeline_config *cfg);

/* True when the config's chain has a gadget of class `gadget`. */
int mr_pipeline_config_uses(const mr_pipeline_config *cfg, const char *gadget);

/* True when `name` is the config's name or one of its aliases. */
int mr_pipeline_config_matches(const mr_pipeline_config *cfg, const char *name);

#endif
