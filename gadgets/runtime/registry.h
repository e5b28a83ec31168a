/* The list of gadget classes a config may name. */
#ifndef MR_GADGETS_REGISTRY_H
#define MR_GADGETS_REGISTRY_H

#include <stdio.h>

#include "gadget.h"

/* The class called name, or NULL. */
const mr_gadget_class *mr_registry_find(const char *name);
/* Every class, NULL-terminated, in the order --describe prints them. */
const mr_gadget_class *const *mr_registry_all(void);
/* Prints every class and its parameters (reconserver --describe). */
void mr_registry_describe(FILE *out);

#endif
