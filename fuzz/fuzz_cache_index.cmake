# The cache index parser; reads the cache's private format header.
kiln_fuzz(cache_index SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_cache_index.c LIBS kiln_cache)
target_include_directories(fuzz_replay_cache_index PRIVATE ${PROJECT_SOURCE_DIR}/src/cache)
if(TARGET fuzz_cache_index)
  target_include_directories(fuzz_cache_index PRIVATE ${PROJECT_SOURCE_DIR}/src/cache)
endif()
