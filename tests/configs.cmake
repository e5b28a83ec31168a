# Every installed config against its stored images (tests/data/config_images),
# on the CPU and, labelled gpu, on the GPU (skips without one).
mr_add_test(test_configs_images SOURCES configs/test_configs_images.c LIBS mr_gadgets mr_client
            TIMEOUT 300)
add_dependencies(test_configs_images reconclient)
add_test(NAME test_configs_images_cuda COMMAND test_configs_images)
set_tests_properties(test_configs_images_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  LABELS gpu
  ENVIRONMENT "MR_TEST_GPUS=all;MR_SOURCE_DIR=${CMAKE_SOURCE_DIR};MR_BINARY_DIR=${CMAKE_BINARY_DIR}")
