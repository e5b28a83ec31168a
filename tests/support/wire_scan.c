#include "wire_scan.h"

#include <string.h>

#include "gadget_harness.h"
#include "wire_client.h"

/* Writes m (takes it); -1 when it was not made or not written. */
static int send_taken(int fd, mr_message *m) {
  int rc = m != NULL ? mr_test_send(fd, m) : -1;
  mr_message_unref(m);
  return rc;
}

int mr_test_send_scan(int fd, const char *config, int nx, int ny, int nch) {
  int rc = send_taken(fd, mr_message_new_config_file(config));
  const char *xml = mr_harness_cartesian_header(nx, ny, 1, nx / 2, ny, 1);
  rc |= send_taken(fd, mr_message_new_text(MR_MSG_HEADER, xml, strlen(xml)));
  for (int e1 = 0; e1 < ny; e1++)
    rc |= send_taken(fd, mr_harness_acquisition(
                             nx, nch, e1, 0, e1 == ny - 1 ? MR_FLAG(ISMRMRD_ACQ_LAST_IN_SLICE) : 0,
                             mr_harness_smooth_line, &e1));
  rc |= send_taken(fd, mr_message_new(MR_MSG_CLOSE));
  return rc < 0 ? -1 : 0;
}
