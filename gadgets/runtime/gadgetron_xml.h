/* Gadgetron XML stream configurations (a CONFIG_SCRIPT a site already
 * has) read as ours: both the 4.x `<gadgetronStreamConfiguration>` form
 * and the `<configuration><version>2</version><stream>` form.
 *
 * A chain is accepted when every gadget in it has a counterpart here, and
 * translated to our canonical order (accumulate, noise_adjust,
 * remove_oversampling, grappa, fft, coil_combine, image_out); readers and
 * writers are the wire format, which is ours anyway. The gadgets with a
 * counterpart:
 *
 *   NoiseAdjustGadget                      noise_adjust (alone: the noise
 *                                          is stored, then discard)
 *   RemoveROOversamplingGadget             remove_oversampling
 *   AcquisitionAccumulateTriggerGadget,
 *   BucketToBufferGadget                   accumulate (per slice)
 *   SimpleReconGadget, FFTGadget,
 *   GenericReconCartesianFFTGadget         fft + coil_combine (rss)
 *   CombineGadget                          coil_combine (rss)
 *   GenericReconCartesianReferencePrepGadget,
 *   GenericReconCartesianGrappaGadget      grappa + fft + coil_combine (weighted)
 *   ImageArraySplitGadget, ImageFinishGadget  (image_out sends each image)
 *   ExtractGadget, ComplexToFloatGadget    image_out's type (magnitude, real,
 *                                          imag or phase; complex without)
 *   IsmrmrdDumpGadget                      raw_dump (alone)
 *
 * Anything else (filters, coil compression, scaling, unsigned-short
 * conversion, Python or external gadgets, parallel or distributed
 * sections) is refused with a line naming the gadget. */
#ifndef MR_GADGETS_GADGETRON_XML_H
#define MR_GADGETS_GADGETRON_XML_H

#include <stddef.h>

#include "error.h"
#include "pipeline_config.h"

/* The prefix Gadgetron's client puts before a measurement id in the
 * dependency query's noise_file property. */
#define MR_GADGETRON_NOISE_PREFIX "GadgetronNoiseCovarianceMatrix_"

/* 1 when text is Gadgetron's noise-dependency query (a chain with a
 * NoiseSummaryGadget; docs/protocol.md rule 6), with the measurement id it asks
 * about in id (its noise_file property, the prefix removed; "" when it has
 * none); 0 for any other text. */
int mr_gadgetron_xml_noise_query(const char *text, size_t len, char *id, size_t size);

/* Translates a Gadgetron chain into a config of ours (*out, owned by the
 * caller). MR_ECONFIG with a line in err when the text is not such a
 * chain or a gadget in it has no counterpart. */
int mr_gadgetron_xml_translate(const char *text, size_t len, mr_pipeline_config **out,
                               mr_err *err);

#endif
