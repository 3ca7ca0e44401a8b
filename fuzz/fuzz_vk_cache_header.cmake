if(TARGET kiln_vk)
  kiln_fuzz(vk_cache_header SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_vk_cache_header.c
            LIBS kiln_vk)
  target_include_directories(fuzz_replay_vk_cache_header PRIVATE ${PROJECT_SOURCE_DIR}/src/vk)
  if(KILN_FUZZ)
    target_include_directories(fuzz_vk_cache_header PRIVATE ${PROJECT_SOURCE_DIR}/src/vk)
  endif()
endif()
