/* Checks a non-Cartesian k-space buffer's sample positions before they are
 * gridded or summed: a finite but absurd position (say 1e30) would turn
 * into an image of NaN or noise, sent as if it were fine. */
#ifndef MR_GADGETS_POSITIONS_H
#define MR_GADGETS_POSITIONS_H

#include "gadget.h"
#include "kspace.h"

/* Positions are in cycles per pixel, the matrix's k-space spanning
 * [-0.5, 0.5); beyond this (1.5 times that) a position is refused. */
#define MR_POSITIONS_LIMIT 0.75

/* Fails (MR_EDATA, via ctx) at the first sampled position of k whose first
 * `rank` components are not all within +-MR_POSITIONS_LIMIT (NaN
 * included), naming the line, repetition, sample, component and value;
 * `weights` also checks the component past them (density weights) for
 * being finite. `matrix` says whose matrix ("encoded", "recon") n is. */
int mr_positions_check(mr_gadget_ctx *ctx, const mr_kspace *k, int rank, int weights,
                       const size_t n[3], const char *matrix);

#endif
