# Tests of client/: one program per module, and the end-to-end run of
# reconclient against reconserver on loopback.

# Decodes the PNGs the client writes, for the preview tests.
add_library(mr_test_client_png STATIC client/test_client_png_read.c)
target_include_directories(mr_test_client_png PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/client)
target_link_libraries(mr_test_client_png PUBLIC PkgConfig::PNG)

foreach(noun dataset output stream preview readahead sampling)
  mr_add_test(test_client_${noun} SOURCES client/test_client_${noun}.c LIBS mr_client mr_test_client_png)
endforeach()

# reconserver and reconclient side by side in a temporary folder, and the
# images they write read back (the end-to-end tests).
add_library(mr_test_client_env STATIC support/client_env.c)
target_link_libraries(mr_test_client_env PUBLIC mr_wire_client ISMRMRD::ISMRMRD)

mr_add_test(test_client_e2e SOURCES client/test_client_e2e.c LIBS mr_test_client_env TIMEOUT 120)
add_dependencies(test_client_e2e reconclient reconserver)

# Issue 14: DICOM from the server (1018) and from images, checked with dcmdump.
mr_add_test(test_client_dicom SOURCES client/test_client_dicom.c
            LIBS mr_test_client_env mr_test_dcmdump TIMEOUT 120)
add_dependencies(test_client_dicom reconclient reconserver)
