# Packed blobs and program payloads: every parser of packed bytes.
kiln_fuzz(pack_decode SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_pack_decode.c LIBS kiln_program kiln_pack)
# The target reseals format-3 and -4 blobs with the pack module's internal helper.
target_include_directories(fuzz_replay_pack_decode PRIVATE ${PROJECT_SOURCE_DIR}/src/pack)
if(KILN_FUZZ)
  target_include_directories(fuzz_pack_decode PRIVATE ${PROJECT_SOURCE_DIR}/src/pack)
endif()
