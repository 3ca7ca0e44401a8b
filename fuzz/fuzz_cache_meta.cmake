# The decoder of the cache's settings file (programs.kpm: the size cap).
kiln_fuzz(cache_meta SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_cache_meta.c LIBS kiln_cache)
target_include_directories(fuzz_replay_cache_meta PRIVATE ${PROJECT_SOURCE_DIR}/src/cache)
if(TARGET fuzz_cache_meta)
  target_include_directories(fuzz_cache_meta PRIVATE ${PROJECT_SOURCE_DIR}/src/cache)
endif()
