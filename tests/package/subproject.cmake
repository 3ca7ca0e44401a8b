cmake_minimum_required(VERSION 3.20)
# cmake -DKILN_SOURCE=dir -DOUT=dir -DGENERATOR=Ninja -DCC=cc -P subproject.cmake
# Configures tests/package/parent (kiln by add_subdirectory) and checks it
# took the parent's zstd target. Configure only, to stay quick: linking the
# static libkiln is what the example tests do.
file(REMOVE_RECURSE ${OUT})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${KILN_SOURCE}/tests/package/parent -B ${OUT}
                        -G ${GENERATOR} -DCMAKE_C_COMPILER=${CC} -DKILN_SOURCE=${KILN_SOURCE}
                        -DPARENT_BUILD_TYPE=
                RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring the parent failed:\n${log}")
endif()
if(NOT log MATCHES "kiln: libzstd from the target zstd::libzstd")
  message(FATAL_ERROR "kiln did not take the parent's zstd target:\n${log}")
endif()
