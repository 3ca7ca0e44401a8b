# Packed blobs and program payloads: every parser of packed bytes.
kiln_fuzz(pack_decode SOURCE ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_pack_decode.c LIBS kiln_pack)
