#include "dicom_dir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dicom_image.h"

int mr_dicom_dir_open(mr_dicom_dir *d, const char *path, const char *prefix, int convert,
                      const char *header, mr_err *err) {
  memset(d, 0, sizeof *d);
  struct stat st;
  if (mkdir(path, 0777) != 0 && !(errno == EEXIST && stat(path, &st) == 0 && S_ISDIR(st.st_mode)))
    return mr_err_set(err, MR_EIO, "cannot use %s as the DICOM directory: %s", path,
                      errno == EEXIST ? "not a directory" : strerror(errno));
  snprintf(d->path, sizeof d->path, "%s", path);
  /* The prefix is the output group: a name, never a path. */
  size_t n = 0;
  for (const char *p = prefix; *p != '\0' && n + 1 < sizeof d->prefix; p++)
    d->prefix[n++] = *p == '/' ? '_' : *p;
  d->prefix[n] = '\0';
  d->convert = convert;
  return convert ? mr_dicom_study_init(&d->study, header, err) : 0;
}

static int write_file(const char *path, const void *bytes, size_t len, mr_err *err) {
  FILE *f = fopen(path, "wb");
  if (f == NULL)
    return mr_err_set(err, MR_EIO, "cannot write %s: %s", path, strerror(errno));
  size_t put = len > 0 ? fwrite(bytes, 1, len, f) : 0;
  int bad = put != len;
  if (fclose(f) != 0 || bad)
    return mr_err_set(err, MR_EIO, "cannot write %s: %s", path, strerror(errno));
  return 0;
}

int mr_dicom_dir_save(mr_dicom_dir *d, const mr_message *m, mr_err *err) {
  char path[4400];
  snprintf(path, sizeof path, "%s/%s_%06u.dcm", d->path, d->prefix, d->count);
  int rc = write_file(path, m->u.dicom.bytes, m->u.dicom.nbytes, err);
  if (rc == 0 && m->u.dicom.attributes[0] != '\0') {
    snprintf(path, sizeof path, "%s/%s_%06u_attrib.xml", d->path, d->prefix, d->count);
    rc = write_file(path, m->u.dicom.attributes, strlen(m->u.dicom.attributes), err);
  }
  d->count++;
  return rc;
}

int mr_dicom_dir_convert(mr_dicom_dir *d, const mr_message *m, mr_err *err) {
  if (!d->convert)
    return 0;
  const mr_image *im = &m->u.image;
  unsigned planes = mr_dicom_planes(im);
  for (unsigned p = 0; p < planes; p++) {
    uint8_t *bytes = NULL;
    uint32_t len = 0;
    int rc = mr_dicom_encode(&d->study, im, p, &bytes, &len, err);
    if (rc < 0)
      return rc;
    char path[4400];
    if (planes > 1)
      snprintf(path, sizeof path, "%s/%s_image_%u_%u_%u.dcm", d->path, d->prefix,
               im->head.image_series_index, im->head.image_index, p);
    else
      snprintf(path, sizeof path, "%s/%s_image_%u_%u.dcm", d->path, d->prefix,
               im->head.image_series_index, im->head.image_index);
    rc = write_file(path, bytes, len, err);
    free(bytes);
    if (rc < 0)
      return rc;
  }
  return 0;
}
