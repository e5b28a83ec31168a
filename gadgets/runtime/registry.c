#include "registry.h"

#include <string.h>

#include "params.h"

extern const mr_gadget_class mr_gadget_remove_oversampling;
extern const mr_gadget_class mr_gadget_accumulate;
extern const mr_gadget_class mr_gadget_fft;
extern const mr_gadget_class mr_gadget_coil_compress;
extern const mr_gadget_class mr_gadget_coil_combine;
extern const mr_gadget_class mr_gadget_image_out;
extern const mr_gadget_class mr_gadget_scale;
extern const mr_gadget_class mr_gadget_fhd_cg;
extern const mr_gadget_class mr_gadget_noise_adjust;
extern const mr_gadget_class mr_gadget_grappa;
extern const mr_gadget_class mr_gadget_gridding;
extern const mr_gadget_class mr_gadget_frames;
extern const mr_gadget_class mr_gadget_discard;
extern const mr_gadget_class mr_gadget_raw_dump;
extern const mr_gadget_class mr_gadget_partial_fourier;
extern const mr_gadget_class mr_gadget_slice_grappa;
extern const mr_gadget_class mr_gadget_dicom_out;
extern const mr_gadget_class mr_gadget_external;
extern const mr_gadget_class mr_gadget_cs;
extern const mr_gadget_class mr_gadget_epi;
extern const mr_gadget_class mr_gadget_slice_grappa;

static const mr_gadget_class *const classes[] = {
    &mr_gadget_remove_oversampling,
    &mr_gadget_accumulate,
    &mr_gadget_fft,
    &mr_gadget_coil_compress,
    &mr_gadget_coil_combine,
    &mr_gadget_image_out,
    &mr_gadget_scale,
    &mr_gadget_fhd_cg,
    &mr_gadget_noise_adjust,
    &mr_gadget_grappa,
    &mr_gadget_gridding,
    &mr_gadget_frames,
    &mr_gadget_discard,
    &mr_gadget_raw_dump,
    &mr_gadget_partial_fourier,
    &mr_gadget_slice_grappa,
    &mr_gadget_dicom_out,
    &mr_gadget_external,
    &mr_gadget_cs,
    &mr_gadget_epi,
    &mr_gadget_slice_grappa,
    NULL,
};

const mr_gadget_class *mr_registry_find(const char *name) {
  for (const mr_gadget_class *const *c = classes; *c != NULL; c++)
    if (strcmp((*c)->name, name) == 0)
      return *c;
  return NULL;
}

const mr_gadget_class *const *mr_registry_all(void) { return classes; }

void mr_registry_describe(FILE *out) {
  for (const mr_gadget_class *const *c = classes; *c != NULL; c++) {
    mr_params_describe(*c, out);
    fputc('\n', out);
  }
}
