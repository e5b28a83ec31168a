#include "payload.h"

#include <stddef.h>

#include "error.h"
#include "message.h"

/* out = the product of n factors, or MR_ELIMIT past SIZE_MAX. */
static int product(const uint64_t *factor, int n, uint64_t *out) {
  uint64_t p = 1;
  for (int i = 0; i < n; i++) {
    if (factor[i] != 0 && p > SIZE_MAX / factor[i])
      return MR_ELIMIT;
    p *= factor[i];
  }
  *out = p;
  return 0;
}

int mr_payload_acquisition(const ISMRMRD_AcquisitionHeader *h, uint64_t *traj_bytes,
                           uint64_t *data_bytes) {
  uint64_t traj[] = {h->trajectory_dimensions, h->number_of_samples, sizeof(float)};
  uint64_t data[] = {h->active_channels, h->number_of_samples, sizeof(float complex)};
  uint64_t t = 0, d = 0;
  int rc = product(traj, 3, &t);
  if (rc == 0)
    rc = product(data, 3, &d);
  if (rc < 0)
    return rc;
  *traj_bytes = t;
  *data_bytes = d;
  return 0;
}

int mr_payload_image(const ISMRMRD_ImageHeader *h, uint64_t *data_bytes) {
  size_t px = mr_image_pixel_bytes(h->data_type);
  if (px == 0)
    return MR_EPROTO;
  uint64_t f[] = {h->matrix_size[0], h->matrix_size[1], h->matrix_size[2], h->channels, px};
  return product(f, 5, data_bytes);
}

int mr_payload_waveform(const ISMRMRD_WaveformHeader *h, uint64_t *data_bytes) {
  uint64_t f[] = {h->channels, h->number_of_samples, sizeof(uint32_t)};
  return product(f, 3, data_bytes);
}

int mr_payload_image_matches(const mr_image *im) {
  uint64_t bytes;
  if (mr_payload_image(&im->head, &bytes) < 0 || bytes != im->data_bytes ||
      (bytes > 0 && im->data == NULL))
    return MR_EDATA;
  return 0;
}
