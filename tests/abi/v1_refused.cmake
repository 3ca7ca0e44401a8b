# cmake -DCLIENT=... -DLIB=... -DSONAME=libkiln.so.2 -DDIR=... -P v1_refused.cmake
# Runs the client built against libkiln.so.1 (tests/abi/v1) with only the
# library of this tree to be found: LIB copied under its SONAME into a
# fresh folder (as an install lays it out; a build tree may keep an old
# libkiln.so.1 link), the only library path. It must not run, and the
# loader's message must name libkiln.so.1.
file(REMOVE_RECURSE ${DIR})
file(MAKE_DIRECTORY ${DIR}/lib)
file(COPY_FILE ${LIB} ${DIR}/lib/${SONAME})
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${DIR}/lib ${CLIENT} ${DIR}/cache
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0 OR out MATCHES "v1 client ran")
  message(FATAL_ERROR "the libkiln.so.1 client ran beside libkiln.so.2 (exit ${rc}):\n${out}${err}")
endif()
if(NOT err MATCHES "libkiln\\.so\\.1")
  message(FATAL_ERROR "refused, but the loader did not name libkiln.so.1 (exit ${rc}):\n${err}")
endif()
string(STRIP "${err}" err)
message("refused at load, as it must be: ${err}")
