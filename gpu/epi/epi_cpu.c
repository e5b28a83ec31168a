#include "epi_impl.h"

int mr_epi_cpu_scale_rows(mr_device *dev, int rows, int cols, int ld, const mr_cfloat *factors,
                          mr_cfloat *x) {
  (void)dev;
  for (int j = 0; j < cols; j++) {
    mr_cfloat *col = x + (size_t)j * (size_t)ld;
    for (int i = 0; i < rows; i++)
      col[i] *= factors[i];
  }
  return 0;
}
