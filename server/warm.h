/* Warm start (--warm DIR): before /readyz says ready, the server sends
 * itself, over loopback, each recorded session in DIR, once per GPU at the
 * same time (placement puts one on each), and discards the answers. A file
 * is either a whole session (the bytes a client sends, CONFIG_FILE or
 * CONFIG_SCRIPT to CLOSE, as `mr-bench stream` writes it), or a dump the
 * ismrmrd_dump config stored in dumps/ of --state-dir (HEADER to CLOSE)
 * saved as CONFIG.mrd: it is sent with config CONFIG.
 *
 * Whatever the first session of a shape makes on first use is then made:
 * the CUDA kernels of the chain loaded (lazy module loading), the FFT plans
 * of its shapes in the lanes' caches (cuFFT, FFTW), the NUFFT plans and
 * their scratch, the device memory pools grown, the chain's per-trajectory
 * state, so that a scanner's first scan after a restart costs what its
 * hundredth does. A shape no recorded session has is prepared by its first
 * scan, once (the caches are the server's, not a session's). A session
 * that fails is logged and skipped; the server becomes ready either way. */
#ifndef MR_SERVER_WARM_H
#define MR_SERVER_WARM_H

#include <sys/socket.h>

#include <uv.h>

typedef struct mr_warm mr_warm;

/* Starts replaying dir's files (sorted by name; dot files skipped) to the
 * server listening at addr, `copies` of each at once, on a thread of its
 * own; the metrics state goes from warming to accepting when it is done.
 * NULL when the thread cannot start (the server is then ready at once). */
mr_warm *mr_warm_start(const char *dir, const struct sockaddr_storage *addr, int copies);

/* Waits for the warm-up (which a draining server's closed sockets end
 * soon) and frees it. NULL: nothing. */
void mr_warm_join(mr_warm *w);

#endif
