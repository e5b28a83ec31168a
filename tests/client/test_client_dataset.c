/* client/dataset: the header as stored, acquisitions and waveforms merged
 * by time stamp with their samples intact, read-only opening, and the
 * one-line errors for files that cannot be streamed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include <ismrmrd/dataset.h>

#include "dataset.h"
#include "test_support.h"

static const char header[] = "<?xml version=\"1.0\"?><ismrmrdHeader><version>2</version>"
                             "</ismrmrdHeader>";

/* Acquisition i: time stamp 10 i, 3 channels of 4 samples, 2D trajectory;
 * waveform j: time stamp 15 + 5 j, so waveform 1 ties with acquisition 2. */
#define NACQ 5
#define NWAV 3
static uint32_t wav_time(int j) { return 15u + 5u * (uint32_t)j; }
static float sample(int acq, int k) { return (float)(1000 * acq + k); }

static void write_dataset(const char *path, const char *group, int nacq, int nwav) {
  ISMRMRD_Dataset d;
  assert_int_equal(ismrmrd_init_dataset(&d, path, group), 0);
  assert_int_equal(ismrmrd_open_dataset(&d, true), 0);
  assert_int_equal(ismrmrd_write_header(&d, header), 0);
  for (int i = 0; i < nacq; i++) {
    ISMRMRD_Acquisition a;
    ismrmrd_init_acquisition(&a);
    a.head.number_of_samples = 4;
    a.head.active_channels = a.head.available_channels = 3;
    a.head.trajectory_dimensions = 2;
    a.head.acquisition_time_stamp = 10u * (uint32_t)i;
    a.head.scan_counter = (uint32_t)i;
    ismrmrd_make_consistent_acquisition(&a);
    for (int k = 0; k < 12; k++)
      a.data[k] = sample(i, k) + I * (float)k;
    for (int k = 0; k < 8; k++)
      a.traj[k] = (float)(i + k);
    assert_int_equal(ismrmrd_append_acquisition(&d, &a), 0);
    ismrmrd_cleanup_acquisition(&a);
  }
  for (int j = 0; j < nwav; j++) {
    ISMRMRD_Waveform w;
    ismrmrd_init_waveform(&w);
    w.head.number_of_samples = 6;
    w.head.channels = 2;
    w.head.time_stamp = wav_time(j);
    w.head.waveform_id = (uint16_t)j;
    ismrmrd_make_consistent_waveform(&w);
    for (int k = 0; k < 12; k++)
      w.data[k] = (uint32_t)(100 * j + k);
    assert_int_equal(ismrmrd_append_waveform(&d, &w), 0);
    free(w.data);
  }
  ismrmrd_close_dataset(&d);
  free(d.filename);
  free(d.groupname);
}

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "%s", mr_test_tmpdir("mr-dataset"));
  return 0;
}

static void path_in(char *buf, size_t size, const char *name) {
  snprintf(buf, size, "%s/%s", dir, name);
}

static void test_merge_by_time(void **state) {
  (void)state;
  char path[512];
  path_in(path, sizeof path, "merge.h5");
  write_dataset(path, "dataset", NACQ, NWAV);
  /* Read-only: the reader must not need write access. */
  assert_int_equal(chmod(path, 0444), 0);
  mr_dataset *ds = NULL;
  mr_err err = {0};
  assert_int_equal(mr_dataset_open(path, "dataset", &ds, &err), 0);
  assert_string_equal(mr_dataset_header(ds), header);
  assert_int_equal(mr_dataset_acquisitions(ds), NACQ);
  assert_int_equal(mr_dataset_waveforms(ds), NWAV);
  /* Expected order of time stamps: 0 A, 10 A, 15 W, 20 A, 20 W, 25 W,
   * 30 A, 40 A (on a tie the acquisition goes first). */
  const char *order = "AAWAWWAA";
  int acq = 0;
  for (const char *o = order; *o != '\0'; o++) {
    mr_message *m = NULL;
    assert_int_equal(mr_dataset_next(ds, &m, &err), 0);
    assert_non_null(m);
    if (*o == 'A') {
      assert_int_equal(m->kind, MR_MSG_ACQUISITION);
      assert_int_equal(m->u.acq.head.scan_counter, acq);
      assert_int_equal(m->u.acq.head.active_channels, 3);
      for (int k = 0; k < 12; k++) {
        assert_float_equal(crealf(m->u.acq.data[k]), sample(acq, k), 0);
        assert_float_equal(cimagf(m->u.acq.data[k]), (float)k, 0);
      }
      for (int k = 0; k < 8; k++)
        assert_float_equal(m->u.acq.traj[k], (float)(acq + k), 0);
      acq++;
    } else {
      assert_int_equal(m->kind, MR_MSG_WAVEFORM);
      int j = m->u.waveform.head.waveform_id;
      assert_int_equal(m->u.waveform.head.time_stamp, wav_time(j));
      for (int k = 0; k < 12; k++)
        assert_int_equal(m->u.waveform.data[k], 100 * j + k);
    }
    mr_message_unref(m);
  }
  mr_message *end = (mr_message *)1;
  assert_int_equal(mr_dataset_next(ds, &end, &err), 0);
  assert_null(end);
  mr_dataset_close(ds);
}

static void test_other_group(void **state) {
  (void)state;
  char path[512];
  path_in(path, sizeof path, "group.h5");
  write_dataset(path, "scan/one", 2, 0);
  mr_dataset *ds = NULL;
  mr_err err = {0};
  assert_int_equal(mr_dataset_open(path, "scan/one", &ds, &err), 0);
  assert_int_equal(mr_dataset_acquisitions(ds), 2);
  mr_dataset_close(ds);

  /* A missing group names the groups there are. */
  assert_int_equal(mr_dataset_open(path, "dataset", &ds, &err), MR_ENOENT);
  assert_null(ds);
  assert_non_null(strstr(err.msg, "no group 'dataset' (top level: scan)"));
}

static void test_bad_files(void **state) {
  (void)state;
  char path[512];
  mr_dataset *ds = NULL;
  mr_err err = {0};
  path_in(path, sizeof path, "missing.h5");
  assert_int_equal(mr_dataset_open(path, "dataset", &ds, &err), MR_ENOENT);
  assert_non_null(strstr(err.msg, "No such file"));

  path_in(path, sizeof path, "text.h5");
  FILE *f = fopen(path, "w");
  fputs("not hdf5\n", f);
  fclose(f);
  mr_err_clear(&err);
  assert_int_equal(mr_dataset_open(path, "dataset", &ds, &err), MR_EDATA);
  assert_non_null(strstr(err.msg, "is not an HDF5 file"));

  path_in(path, sizeof path, "empty.h5");
  write_dataset(path, "dataset", 0, 1);
  mr_err_clear(&err);
  assert_int_equal(mr_dataset_open(path, "dataset", &ds, &err), MR_EDATA);
  assert_non_null(strstr(err.msg, "has no acquisitions"));
  assert_null(ds);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_merge_by_time),
      cmocka_unit_test(test_other_group),
      cmocka_unit_test(test_bad_files),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
