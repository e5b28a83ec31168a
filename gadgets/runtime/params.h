/* Binds a gadget's JSON entry to its parameter table (gadget.h). */
#ifndef MR_GADGETS_PARAMS_H
#define MR_GADGETS_PARAMS_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "gadget.h"

/* Keys every entry may carry besides the class's own parameters. */
#define MR_PARAM_KEY_GADGET "gadget"   /* the class name */
#define MR_PARAM_KEY_COMMENT "comment" /* free text, ignored */

/* Writes every parameter's default into state, then each key of entry (a
 * JSON object; NULL means defaults only). Unknown keys, wrong types and
 * out-of-range values fail with MR_ECONFIG and a line in err naming the
 * config, the gadget (and its position) and the key; a default that does
 * not bind (a bug in the class's table) fails with MR_EINVAL. A class's
 * defaults are parsed once, on its first bind, and kept for the process.
 * Any thread. Borrows everything. */
int mr_params_bind(const mr_gadget_class *cls, const cJSON *entry, void *state,
                   const char *config, int index, mr_err *err);

/* Prints a class's parameter table (name, type, default, range, help). */
void mr_params_describe(const mr_gadget_class *cls, FILE *out);

#endif
