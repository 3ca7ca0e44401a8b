if(TARGET kiln_vk)
  kiln_fuzz(spirv_reflect SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_spirv_reflect.c
            LIBS kiln_vk)
  target_include_directories(fuzz_replay_spirv_reflect PRIVATE ${PROJECT_SOURCE_DIR}/src/vk)
  if(KILN_FUZZ)
    target_include_directories(fuzz_spirv_reflect PRIVATE ${PROJECT_SOURCE_DIR}/src/vk)
  endif()
endif()
