/* A whole small Cartesian scan over the wire, for the server tests' client
 * threads (no cmocka: callable from any thread). */
#ifndef MR_TEST_WIRE_SCAN_H
#define MR_TEST_WIRE_SCAN_H

/* Sends CONFIG_FILE config, a header of an nx x ny encoded matrix (recon
 * nx/2 x ny: readout oversampling 2), ny lines of nch coils with smooth,
 * coil-dependent samples (mr_harness_smooth_line), the last flagged
 * LAST_IN_SLICE, and CLOSE. Sends everything even after a failed write;
 * 0, or -1 when a message could not be made or written. */
int mr_test_send_scan(int fd, const char *config, int nx, int ny, int nch);

#endif
