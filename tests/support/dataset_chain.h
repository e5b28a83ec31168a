/* An ISMRMRD dataset through a gadget chain outside a server: its
 * acquisitions pushed through the harness (gadget_harness.h), its images
 * collected. For the tests that run whole configs. */
#ifndef MR_TEST_DATASET_CHAIN_H
#define MR_TEST_DATASET_CHAIN_H

#include <stddef.h>

/* Runs the acquisitions of h5 (of repetition 0 only, when asked) through
 * `chain` (a JSON gadget array) on a pool of `gpus` ("none", "all");
 * returns the float images back to back (malloc'd), their count and size.
 * Fails the calling cmocka test on any error. */
float *mr_test_reconstruct(const char *h5, const char *chain, const char *gpus,
                           int first_repetition_only, int *count, size_t *pixels);

/* The same, every repetition, with the chain pipelined as a server runs it
 * (a stage thread per per-slice step, inboxes of depth messages). */
float *mr_test_reconstruct_pipelined(const char *h5, const char *chain, const char *gpus,
                                     size_t depth, int *count, size_t *pixels);

/* The installed config configs/<name>.json's gadget list as JSON text
 * (malloc'd), each `gadget` step's keys set from `with` (a JSON object's
 * text; NULL: as installed). Fails the calling cmocka test when either
 * cannot be read. */
char *mr_test_config_chain(const char *name, const char *gadget, const char *with);

#endif
