#include "output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ismrmrd/dataset.h>

#include "h5.h"
#include "payload.h"

struct mr_output {
  char *path, *group;
  ISMRMRD_Dataset dset;
  int opened;
  uint32_t count;
};

/* The refusal rules: an existing file must be HDF5 and lack the group. */
static int check_target(const char *path, const char *group, mr_err *err) {
  if (access(path, F_OK) != 0)
    return errno == ENOENT ? 0 : mr_err_set(err, MR_EIO, "cannot use %s: %s", path, strerror(errno));
  int rc = 0;
  mr_h5_lock();
  hid_t fid = H5Fis_hdf5(path) > 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
  if (fid < 0)
    rc = mr_err_set(err, MR_EINVAL, "%s exists and is not a readable HDF5 file; not overwriting it",
                    path);
  else if (mr_h5_exists(fid, group))
    rc = mr_err_set(err, MR_EINVAL,
                    "%s already has a group '%s'; not appending to it (choose another -G or -o)",
                    path, group);
  if (fid >= 0)
    H5Fclose(fid);
  mr_h5_unlock();
  return rc;
}

int mr_output_open(const char *path, const char *group, mr_output **out, mr_err *err) {
  *out = NULL;
  if (group[0] == '\0' || strcmp(group, "/") == 0)
    return mr_err_set(err, MR_EINVAL, "the output group name is empty");
  int rc = check_target(path, group, err);
  if (rc < 0)
    return rc;
  mr_output *o = calloc(1, sizeof *o);
  if (o == NULL || (o->path = strdup(path)) == NULL || (o->group = strdup(group)) == NULL) {
    mr_output_close(o, NULL);
    return mr_err_set(err, MR_ENOMEM, "out of memory");
  }
  *out = o;
  return 0;
}

static int open_file(mr_output *o, mr_err *err) {
  /* The group was checked at mr_output_open(); check again in case another
   * writer created it since. */
  int rc = check_target(o->path, o->group, err);
  if (rc < 0)
    return rc;
  mr_h5_lock();
  if (ismrmrd_init_dataset(&o->dset, o->path, o->group) != ISMRMRD_NOERROR ||
      ismrmrd_open_dataset(&o->dset, true) != ISMRMRD_NOERROR)
    rc = mr_err_set(err, MR_EIO, "cannot create %s: %s", o->path, mr_h5_error());
  mr_h5_unlock();
  o->opened = rc == 0;
  return rc;
}

int mr_output_write(mr_output *o, const mr_image *im, uint32_t *index, mr_err *err) {
  int rc;
  /* libismrmrd sizes what it writes from the header. */
  if (mr_payload_image_matches(im) < 0)
    return mr_err_set(err, MR_EDATA,
                      "image %u: its header (%u x %u x %u pixels x %u channels of data_type %u) "
                      "does not match its %zu bytes of data",
                      o->count, im->head.matrix_size[0], im->head.matrix_size[1],
                      im->head.matrix_size[2], im->head.channels, im->head.data_type,
                      im->data_bytes);
  if (!o->opened && (rc = open_file(o, err)) < 0)
    return rc;
  char var[32];
  snprintf(var, sizeof var, "image_%u", (unsigned)im->head.image_series_index);
  ISMRMRD_Image img = {
      .head = im->head,
      /* libismrmrd stores the attributes as a variable-length string: it
       * needs a string, even an empty one. */
      .attribute_string = im->attributes != NULL ? im->attributes : "",
      .data = im->data,
  };
  mr_h5_lock();
  rc = ismrmrd_append_image(&o->dset, var, &img);
  uint32_t n = ismrmrd_get_number_of_images(&o->dset, var);
  if (rc != ISMRMRD_NOERROR || mr_h5_failed() || n == 0)
    rc = mr_err_set(err, MR_EIO, "cannot write image %u to %s:/%s/%s: %s", o->count, o->path,
                    o->group, var, mr_h5_error());
  mr_h5_unlock();
  if (rc < 0)
    return rc;
  o->count++;
  if (index != NULL)
    *index = n - 1;
  return 0;
}

uint32_t mr_output_count(const mr_output *o) { return o->count; }

int mr_output_close(mr_output *o, mr_err *err) {
  if (o == NULL)
    return 0;
  int rc = 0;
  if (o->opened) {
    mr_h5_lock();
    if (ismrmrd_close_dataset(&o->dset) != ISMRMRD_NOERROR)
      rc = mr_err_set(err, MR_EIO, "cannot close %s: %s", o->path, mr_h5_error());
    mr_h5_unlock();
  }
  free(o->dset.filename);
  free(o->dset.groupname);
  free(o->path);
  free(o->group);
  free(o);
  return rc;
}
