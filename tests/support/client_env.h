/* The client's end-to-end tests: a reconserver on loopback, reconclient
 * beside it, a temporary folder for their files, and the images they
 * write read back. Failures abort the test (cmocka). */
#ifndef MR_TEST_CLIENT_ENV_H
#define MR_TEST_CLIENT_ENV_H

#include <stddef.h>
#include <stdint.h>

#include <ismrmrd/ismrmrd.h>

#include "wire_client.h"

typedef struct mr_test_client_env {
  mr_test_server server;
  char dir[256];    /* the temporary folder: data, outputs, the tools' working directory */
  char port[16];    /* the server's port, as reconclient's -p takes it */
  char client[512]; /* the reconclient binary */
} mr_test_client_env;

/* Makes the folder (mr_test_tmpdir(prefix)) and starts the server (on the
 * CPU, or the GPUs MR_TEST_GPUS names). */
void mr_test_client_env_start(mr_test_client_env *e, const char *prefix);
/* Stops the server; its exit status (mr_test_server_stop). */
int mr_test_client_env_stop(mr_test_client_env *e);

/* The folder's file `name`, into buf. */
void mr_test_client_path(const mr_test_client_env *e, char *buf, size_t size, const char *name);

/* Runs reconclient with args (NULL-terminated, at most 30) in the folder.
 * With out, its stdout and stderr come back in out and err as
 * mr_test_run() gives them; without, they go to the test's output. Its
 * exit status. */
int mr_test_reconclient(const mr_test_client_env *e, const char *const *args, char *out,
                        size_t out_size, char *err, size_t err_size);

/* The images of group/var in the ISMRMRD file path, into im[0..): asserts
 * there are at most max and returns how many. Each is freed with
 * ismrmrd_cleanup_image(). */
uint32_t mr_test_read_images(const char *path, const char *group, const char *var,
                             ISMRMRD_Image *im, uint32_t max);

#endif
