#include "client_env.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include <ismrmrd/dataset.h>

#include "test_support.h"

void mr_test_client_env_start(mr_test_client_env *e, const char *prefix) {
  snprintf(e->dir, sizeof e->dir, "%s", mr_test_tmpdir(prefix));
  snprintf(e->client, sizeof e->client, "%s/bin/reconclient", mr_test_binary_dir());
  mr_test_server_start(&e->server, NULL);
  snprintf(e->port, sizeof e->port, "%d", e->server.port);
}

int mr_test_client_env_stop(mr_test_client_env *e) { return mr_test_server_stop(&e->server); }

void mr_test_client_path(const mr_test_client_env *e, char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", e->dir, name);
}

int mr_test_reconclient(const mr_test_client_env *e, const char *const *args, char *out,
                        size_t out_size, char *err, size_t err_size) {
  const char *argv[32] = {e->client};
  int n = 1;
  for (int i = 0; args[i] != NULL && n < 31; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  return mr_test_run(argv, out != NULL ? e->dir : NULL, out, out_size, err, err_size);
}

uint32_t mr_test_read_images(const char *path, const char *group, const char *var,
                             ISMRMRD_Image *im, uint32_t max) {
  ISMRMRD_Dataset d;
  assert_int_equal(ismrmrd_init_dataset(&d, path, group), 0);
  assert_int_equal(ismrmrd_open_dataset(&d, false), 0);
  uint32_t n = ismrmrd_get_number_of_images(&d, var);
  assert_true(n <= max);
  for (uint32_t i = 0; i < n; i++) {
    ismrmrd_init_image(&im[i]);
    assert_int_equal(ismrmrd_read_image(&d, var, i, &im[i]), 0);
  }
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
  return n;
}
