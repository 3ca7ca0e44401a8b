cmake_minimum_required(VERSION 3.20)
# cmake -DPREFIX=dir -P man_and_completions.cmake: the man page and the
# shell completions are in an installed prefix, where man, bash-completion,
# zsh and fish look for them, and none is empty.
include(GNUInstallDirs)
foreach(f ${CMAKE_INSTALL_MANDIR}/man1/kiln.1
          ${CMAKE_INSTALL_DATADIR}/bash-completion/completions/kiln
          ${CMAKE_INSTALL_DATADIR}/zsh/site-functions/_kiln
          ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d/kiln.fish)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "not installed: ${f}")
  endif()
  file(SIZE ${PREFIX}/${f} size)
  if(size EQUAL 0)
    message(FATAL_ERROR "installed empty: ${f}")
  endif()
endforeach()
message("man page and completions installed in ${PREFIX}")
