foreach(t runtime/chain runtime/pipeline runtime/placement runtime/capability runtime/workers
          data/kspace
          cartesian/accumulate
          cartesian/remove_oversampling cartesian/fft output/coil_combine output/image_out
          noncartesian/frames)
  get_filename_component(room ${t} DIRECTORY)
  get_filename_component(name ${t} NAME)
  mr_add_test(test_gadgets_${name} SOURCES gadgets/${room}/test_gadgets_${name}.c
              LIBS mr_gadget_harness)
endforeach()
# kspace --cuda: pinned memory's count against the budget (a GPU's).
add_test(NAME test_gadgets_kspace_cuda COMMAND test_gadgets_kspace --cuda)
set_tests_properties(test_gadgets_kspace_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
  LABELS gpu)
mr_add_test(test_gadgets_dicom_out SOURCES gadgets/output/test_gadgets_dicom_out.c
  LIBS mr_gadget_harness mr_test_dcmdump)
# scale: the worked example of docs/writing-a-gadget.md.
mr_add_test(test_gadgets_scale SOURCES gadgets/output/test_gadgets_scale.c LIBS mr_gadget_harness)

# The installed Cartesian configs end to end: per-slice against per-line on
# the CPU; with --cuda the GPU chain against the CPU chain.
add_library(mr_test_dataset_chain STATIC support/dataset_chain.c)
target_link_libraries(mr_test_dataset_chain PUBLIC mr_gadget_harness mr_client
                      PkgConfig::CMOCKA)
mr_add_test(test_gadgets_configs SOURCES gadgets/runtime/test_gadgets_configs.c
            LIBS mr_test_dataset_chain TIMEOUT 120)
add_test(NAME test_gadgets_configs_cuda COMMAND test_gadgets_configs --cuda)
set_tests_properties(test_gadgets_configs_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  LABELS gpu)

# Real-scan features (slices, echoes, sets, averages, navigators, partial
# Fourier, asymmetric echo) through the installed cartesian config.
mr_add_test(test_gadgets_scans SOURCES gadgets/cartesian/test_gadgets_scans.c
            LIBS mr_gadget_harness mr_test_grappa_phantom)
mr_add_test(test_gadgets_partial_fourier SOURCES gadgets/cartesian/test_gadgets_partial_fourier.c
            LIBS mr_gadget_harness)

# The external gadget: the example Python step in both modes, misbehaving
# peers and programs, the --external-dir allow-list.
mr_add_test(test_gadgets_external SOURCES gadgets/external/test_gadgets_external.c
            LIBS mr_gadget_harness mr_client TIMEOUT 120)
# Issue 27 item 14: dicom_out's files against a DICOM validator (dciodvfy;
# skipped where dicom3tools is not installed).
mr_add_test(test_gadgets_dicom_valid SOURCES gadgets/output/test_gadgets_dicom_valid.c
  LIBS mr_gadget_harness)

# EPI: the epi gadget on simulated single-shot, ramp-sampled and segmented
# scans against the error-free reconstruction and the truth, the configs
# epi and epi_sms (multiband 4, 32 coils); --cuda: the GPU chains. About
# 10 s alone, 140 s under ASan on a loaded 2-core machine.
mr_add_test(test_gadgets_epi SOURCES gadgets/epi/test_gadgets_epi.c
            LIBS mr_test_dataset_chain mr_test_phantom_support TIMEOUT 600)
add_test(NAME test_gadgets_epi_cuda COMMAND test_gadgets_epi --cuda)
set_tests_properties(test_gadgets_epi_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  LABELS gpu)
