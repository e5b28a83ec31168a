/* The simultaneous multi-slice mode of `reconclient simulate` (see
 * simulate_sms.c for the scan it writes). */
#ifndef MR_CLIENT_SIMULATE_SMS_H
#define MR_CLIENT_SIMULATE_SMS_H

#include "simulate.h"

/* Writes o->path: a multiband o->multiband scan with CAIPI shift FOV /
 * o->caipi (0: none) and its single-band reference. The options are
 * checked as mr_simulate() checks them first. */
int mr_simulate_sms(const mr_sim_options *o, mr_err *err);

#endif
