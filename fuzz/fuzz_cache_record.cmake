# The cache's record-head and file-header readers; reads the private format header.
kiln_fuzz(cache_record SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_cache_record.c LIBS kiln_cache)
target_include_directories(fuzz_replay_cache_record PRIVATE ${PROJECT_SOURCE_DIR}/src/cache)
if(TARGET fuzz_cache_record)
  target_include_directories(fuzz_cache_record PRIVATE ${PROJECT_SOURCE_DIR}/src/cache)
endif()
