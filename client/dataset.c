#include "dataset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ismrmrd/dataset.h>

#include "h5.h"

struct mr_dataset {
  ISMRMRD_Dataset dset;
  char *header;
  uint32_t nacq, nwav;
  uint32_t next_acq, next_wav; /* indices of the next to read */
  mr_message *acq, *wav;       /* read ahead, not yet handed out */
  ISMRMRD_Acquisition abuf;    /* libismrmrd's buffers, reused */
  ISMRMRD_Waveform wbuf;
};

int mr_dataset_open(const char *path, const char *group, mr_dataset **out, mr_err *err) {
  *out = NULL;
  if (access(path, R_OK) != 0)
    return mr_err_set(err, MR_ENOENT, "cannot read %s: %s", path, strerror(errno));
  mr_dataset *ds = calloc(1, sizeof *ds);
  if (ds == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory");
  ismrmrd_init_acquisition(&ds->abuf);
  ismrmrd_init_waveform(&ds->wbuf);
  int rc = 0;
  mr_h5_lock();
  if (ismrmrd_init_dataset(&ds->dset, path, group) != ISMRMRD_NOERROR) {
    rc = mr_err_set(err, MR_ENOMEM, "out of memory");
    goto done;
  }
  if (H5Fis_hdf5(path) <= 0) {
    rc = mr_err_set(err, MR_EDATA, "%s is not an HDF5 file", path);
    goto done;
  }
  /* Opened by hand, read-only: ismrmrd_open_dataset() opens read-write
   * (failing on read-only files and mounts) and creates a missing group.
   * The ismrmrd_read_* functions only need fileid and groupname. */
  hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (fid < 0) {
    rc = mr_err_set(err, MR_EIO, "cannot open %s as HDF5", path);
    goto done;
  }
  ds->dset.fileid = fid;
  if (!mr_h5_exists(fid, group)) {
    char top[256];
    mr_h5_list_top(fid, top, sizeof top);
    rc = mr_err_set(err, MR_ENOENT, "%s has no group '%s' (top level: %s); name one with -g", path,
                    group, top);
    goto done;
  }
  ds->header = ismrmrd_read_header(&ds->dset);
  if (ds->header == NULL) {
    rc = mr_err_set(err, MR_EHEADER, "%s: group '%s' has no ISMRMRD XML header (%s/xml)", path,
                    group, group);
    goto done;
  }
  ds->nacq = ismrmrd_get_number_of_acquisitions(&ds->dset);
  ds->nwav = ismrmrd_get_number_of_waveforms(&ds->dset);
  if (ds->nacq == 0)
    rc = mr_err_set(err, MR_EDATA, "%s: group '%s' has no acquisitions (%s/data)", path, group,
                    group);
done:
  mr_h5_unlock();
  if (rc < 0) {
    mr_dataset_close(ds);
    return rc;
  }
  *out = ds;
  return 0;
}

const char *mr_dataset_header(const mr_dataset *ds) { return ds->header; }
uint32_t mr_dataset_acquisitions(const mr_dataset *ds) { return ds->nacq; }
uint32_t mr_dataset_waveforms(const mr_dataset *ds) { return ds->nwav; }

/* Ends a read begun with mr_h5_lock() that returned rc: item i of what. */
static int unlock_checked(const mr_dataset *ds, int rc, const char *what, uint32_t i,
                          mr_err *err) {
  int failed = rc != ISMRMRD_NOERROR || mr_h5_failed();
  if (failed)
    mr_err_set(err, MR_EIO, "%s: cannot read %s %u: %s", ds->dset.filename, what, i,
               mr_h5_error());
  mr_h5_unlock();
  return failed ? MR_EIO : 0;
}

static int read_acquisition(mr_dataset *ds, mr_err *err) {
  uint32_t i = ds->next_acq++;
  mr_h5_lock();
  int rc = unlock_checked(ds, ismrmrd_read_acquisition(&ds->dset, i, &ds->abuf), "acquisition",
                          i, err);
  if (rc < 0)
    return rc;
  const ISMRMRD_Acquisition *a = &ds->abuf;
  ds->acq = mr_message_new_acquisition(&a->head);
  if (ds->acq == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory reading acquisition %u", i);
  size_t nt = mr_acquisition_traj_count(&a->head), nd = mr_acquisition_data_count(&a->head);
  if (nt > 0)
    memcpy(ds->acq->u.acq.traj, a->traj, nt * sizeof(float));
  if (nd > 0)
    memcpy(ds->acq->u.acq.data, a->data, nd * sizeof(float complex));
  return 0;
}

static int read_waveform(mr_dataset *ds, mr_err *err) {
  uint32_t i = ds->next_wav++;
  mr_h5_lock();
  int rc = unlock_checked(ds, ismrmrd_read_waveform(&ds->dset, i, &ds->wbuf), "waveform", i, err);
  if (rc < 0)
    return rc;
  ds->wav = mr_message_new_waveform(&ds->wbuf.head);
  if (ds->wav == NULL)
    return mr_err_set(err, MR_ENOMEM, "out of memory reading waveform %u", i);
  size_t n = mr_waveform_data_count(&ds->wbuf.head);
  if (n > 0)
    memcpy(ds->wav->u.waveform.data, ds->wbuf.data, n * sizeof(uint32_t));
  return 0;
}

int mr_dataset_next(mr_dataset *ds, mr_message **out, mr_err *err) {
  *out = NULL;
  int rc;
  if (ds->acq == NULL && ds->next_acq < ds->nacq && (rc = read_acquisition(ds, err)) < 0)
    return rc;
  if (ds->wav == NULL && ds->next_wav < ds->nwav && (rc = read_waveform(ds, err)) < 0)
    return rc;
  mr_message **pick = &ds->acq;
  if (ds->wav != NULL &&
      (ds->acq == NULL ||
       ds->wav->u.waveform.head.time_stamp < ds->acq->u.acq.head.acquisition_time_stamp))
    pick = &ds->wav;
  *out = *pick;
  *pick = NULL;
  return 0;
}

void mr_dataset_close(mr_dataset *ds) {
  if (ds == NULL)
    return;
  mr_message_unref(ds->acq);
  mr_message_unref(ds->wav);
  ismrmrd_cleanup_acquisition(&ds->abuf);
  free(ds->wbuf.data);
  free(ds->header);
  mr_h5_lock();
  ismrmrd_close_dataset(&ds->dset);
  mr_h5_unlock();
  /* ismrmrd_close_dataset() leaves these to the caller. */
  free(ds->dset.filename);
  free(ds->dset.groupname);
  free(ds);
}
