# Issue 13: deployment. A real Prometheus scraping --http (skips without
# the prometheus package).
add_test(NAME prometheus_scrape COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/deploy/prometheus_scrape.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(prometheus_scrape PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
# deploy/k8s rendered and validated offline against the Kubernetes schema
# (skips without kubectl or python3-kubernetes).
add_test(NAME k8s_manifests COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/deploy/k8s_manifests.sh
         ${CMAKE_SOURCE_DIR})
set_tests_properties(k8s_manifests PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
# docker/compose.yaml as Compose reads it (skips without docker-compose).
add_test(NAME compose_config COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/deploy/compose_config.sh
         ${CMAKE_SOURCE_DIR})
set_tests_properties(compose_config PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)
