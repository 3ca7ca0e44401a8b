cmake_minimum_required(VERSION 3.20)
# cmake -DBUILD=build -DPREFIX=dir -P install.cmake: a fresh `cmake --install`.
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX}
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD} --prefix ${PREFIX} failed")
endif()
file(GLOB_RECURSE installed RELATIVE ${PREFIX} ${PREFIX}/*)
foreach(f include/kiln.h include/kiln/version.h include/kiln/foz.h bin/kiln /pkgconfig/kiln.pc
          /cmake/kiln/kilnConfig.cmake /cmake/kiln/kilnConfigVersion.cmake /libkiln.a
          /libkiln.so.2)
  set(found ${installed})
  string(REPLACE "." "\\." re ${f})
  list(FILTER found INCLUDE REGEX "^${re}$|${re}$")
  if(NOT found)
    message(FATAL_ERROR "not installed: ${f}")
  endif()
endforeach()
message("installed into ${PREFIX}")
