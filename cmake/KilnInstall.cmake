# Install rules: the headers, libkiln (static and shared), the kiln command,
# kiln.pc and the CMake package (kilnConfig.cmake, exporting kiln::kiln).
#
# kiln.pc is relocatable (its prefix is found from its own folder), so
# `cmake --install build --prefix DIR` gives a working DIR/lib/pkgconfig.

include(CMakePackageConfigHelpers)

# What the static library needs, in kiln.pc's words and in the CMake
# package's. Targets made by pkg_check_modules become Requires.private;
# libraries become -l flags.
set(_kiln_pkg_names ZSTD libzstd XXHASH libxxhash JSONC json-c ZLIB zlib SHADERC shaderc
    VULKAN vulkan)
set(KILN_PC_REQUIRES_PRIVATE)
set(KILN_PC_LIBS_PRIVATE)
set(KILN_CONFIG_PKG_DEPS)
foreach(d ${KILN_LINK_DEPS})
  if(d MATCHES "^PkgConfig::(.+)$")
    set(_prefix ${CMAKE_MATCH_1})
    list(FIND _kiln_pkg_names ${_prefix} _at)
    if(_at GREATER_EQUAL 0)
      math(EXPR _at "${_at} + 1")
      list(GET _kiln_pkg_names ${_at} _module)
    elseif(${_prefix}_MODULE_NAME)
      set(_module ${${_prefix}_MODULE_NAME})
    else()
      message(FATAL_ERROR "kiln: no pkg-config name for ${d}")
    endif()
    string(APPEND KILN_PC_REQUIRES_PRIVATE " ${_module}")
    list(APPEND KILN_CONFIG_PKG_DEPS ${_prefix} ${_module})
  elseif(d STREQUAL "Threads::Threads")
    if(CMAKE_THREAD_LIBS_INIT)
      string(APPEND KILN_PC_LIBS_PRIVATE " ${CMAKE_THREAD_LIBS_INIT}")
    endif()
  elseif(IS_ABSOLUTE "${d}")
    get_filename_component(_dir ${d} DIRECTORY)
    get_filename_component(_name ${d} NAME_WE)
    string(REGEX REPLACE "^lib" "" _name ${_name})
    if(NOT _dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
      string(APPEND KILN_PC_LIBS_PRIVATE " -L${_dir}")
    endif()
    string(APPEND KILN_PC_LIBS_PRIVATE " -l${_name}")
  elseif(d MATCHES "^-")
    string(APPEND KILN_PC_LIBS_PRIVATE " ${d}")
  elseif(NOT TARGET ${d})
    string(APPEND KILN_PC_LIBS_PRIVATE " -l${d}")
  else()
    message(FATAL_ERROR "kiln: cannot name ${d} in kiln.pc")
  endif()
endforeach()
string(STRIP "${KILN_PC_REQUIRES_PRIVATE}" KILN_PC_REQUIRES_PRIVATE)
string(STRIP "${KILN_PC_LIBS_PRIVATE}" KILN_PC_LIBS_PRIVATE)
# On Windows a static-only install has no DLL to import from.
set(KILN_PC_CFLAGS)
set(KILN_PC_CFLAGS_PRIVATE)
if(WIN32)
  set(KILN_PC_CFLAGS_PRIVATE "-DKILN_STATIC")
  if(NOT KILN_BUILD_SHARED)
    set(KILN_PC_CFLAGS " -DKILN_STATIC")
  endif()
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  message(FATAL_ERROR "kiln: CMAKE_INSTALL_LIBDIR must be relative to the prefix")
endif()
file(RELATIVE_PATH KILN_PC_PREFIX_FROM_PCDIR /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" KILN_PC_PREFIX_FROM_PCDIR "${KILN_PC_PREFIX_FROM_PCDIR}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln.pc.in ${PROJECT_BINARY_DIR}/kiln.pc @ONLY)

if(NOT KILN_INSTALL)
  return()
endif()

set(_kiln_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/kiln/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln COMPONENT dev)
install(TARGETS ${KILN_LIBRARIES} EXPORT kilnTargets
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT lib
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(KILN_BUILD_TOOLS AND TARGET kiln_cli)
  install(TARGETS kiln_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)
  # The man page and the shell completions, where each shell looks for them.
  set(_kiln_completions ${PROJECT_SOURCE_DIR}/tools/kiln/completions)
  install(FILES ${PROJECT_SOURCE_DIR}/docs/man/kiln.1
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tools)
  install(FILES ${_kiln_completions}/kiln.bash RENAME kiln
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions COMPONENT tools)
  install(FILES ${_kiln_completions}/_kiln
          DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/site-functions COMPONENT tools)
  install(FILES ${_kiln_completions}/kiln.fish
          DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d COMPONENT tools)
endif()
install(FILES ${PROJECT_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)

install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${_kiln_cmake_dir} COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${_kiln_cmake_dir})
# 0.x releases may break the API between minor versions, so a 0.1 request
# is met by 0.1.y only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${_kiln_cmake_dir} COMPONENT dev)
