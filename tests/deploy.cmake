# Issue 13: deployment. A real Prometheus scraping --http (skips without
# the prometheus package).
add_test(NAME prometheus_scrape COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/deploy/prometheus_scrape.sh
         ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR})
set_tests_properties(prometheus_scrape PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
