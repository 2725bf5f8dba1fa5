# LLVM 19 for the JIT tier (src/jit/llvm_*.c): finds the shared libLLVM through llvm-config,
# adds its headers to stax_objects and links it into stax_static / stax_shared (PUBLIC, so the
# CLI and the unit tests get it through stax_static). With STAX_STATIC_DEPS
# (cmake/static_deps.cmake) stax_shared links LLVM's static component archives instead.
#
# Self-contained: include(cmake/llvm.cmake) anywhere after add_library(stax_objects ...) does
# all the work; targets declared later are reached through cmake_language(DEFER), so it also
# works at the very end of CMakeLists.txt.
#
# When LLVM is missing (or STAX_JIT_LLVM=OFF) the project still builds: STAX_HAVE_LLVM=0 makes
# the backend compile to a stub whose every compile returns UNIMPLEMENTED, so the VM keeps
# interpreting. Never a configure failure for a missing optional tier.

option(STAX_JIT_LLVM "Build the LLVM (CPU) JIT backend when LLVM 19 is available" ON)
set(STAX_LLVM_CONFIG "" CACHE FILEPATH "llvm-config of the LLVM 19 to use (empty: search)")

set(STAX_LLVM_FOUND OFF)
set(STAX_LLVM_INCLUDE_DIR "")
set(STAX_LLVM_LIBS "")

if(STAX_JIT_LLVM)
  if(NOT STAX_LLVM_CONFIG)
    find_program(STAX_LLVM_CONFIG_FOUND NAMES llvm-config-19 llvm-config
                 HINTS /usr/lib/llvm-19/bin)
    if(STAX_LLVM_CONFIG_FOUND)
      set(STAX_LLVM_CONFIG "${STAX_LLVM_CONFIG_FOUND}")
    endif()
  endif()
  if(STAX_LLVM_CONFIG)
    execute_process(COMMAND "${STAX_LLVM_CONFIG}" --version
                    OUTPUT_VARIABLE stax_llvm_version OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE stax_llvm_rc)
    # The C API used (ORC LLJIT, LLVMRunPasses, the new pass manager) is that of LLVM 19.
    if(stax_llvm_rc EQUAL 0 AND stax_llvm_version MATCHES "^19\\.")
      execute_process(COMMAND "${STAX_LLVM_CONFIG}" --includedir
                      OUTPUT_VARIABLE STAX_LLVM_INCLUDE_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
      execute_process(COMMAND "${STAX_LLVM_CONFIG}" --libdir
                      OUTPUT_VARIABLE stax_llvm_libdir OUTPUT_STRIP_TRAILING_WHITESPACE)
      find_library(STAX_LLVM_LIBRARY NAMES LLVM-19 LLVM HINTS "${stax_llvm_libdir}"
                   NO_DEFAULT_PATH)
      if(STAX_LLVM_LIBRARY AND EXISTS "${STAX_LLVM_INCLUDE_DIR}/llvm-c/LLJIT.h")
        set(STAX_LLVM_FOUND ON)
        set(STAX_LLVM_LIBS "${STAX_LLVM_LIBRARY}")
      endif()
    else()
      message(STATUS "stax: ${STAX_LLVM_CONFIG} reports LLVM '${stax_llvm_version}', need 19")
    endif()
  endif()
endif()

if(STAX_LLVM_FOUND)
  message(STATUS "stax: LLVM JIT backend on (${STAX_LLVM_LIBRARY})")
  # SYSTEM: LLVM's headers are not held to our -Wall -Wextra -Werror.
  target_include_directories(stax_objects SYSTEM PRIVATE "${STAX_LLVM_INCLUDE_DIR}")
  target_compile_definitions(stax_objects PRIVATE STAX_HAVE_LLVM=1)
else()
  message(STATUS "stax: LLVM 19 not found or disabled; the JIT backend compiles as a stub")
  target_compile_definitions(stax_objects PRIVATE STAX_HAVE_LLVM=0)
endif()

# Links libLLVM into the libraries once they exist (now, or at the end of the directory).
function(stax_llvm_link_targets)
  if(NOT STAX_LLVM_FOUND)
    return()
  endif()
  if(TARGET stax_static)
    target_link_libraries(stax_static PUBLIC ${STAX_LLVM_LIBS})
  endif()
  if(TARGET stax_shared AND STAX_STATIC_DEPS)
    stax_static_llvm_libs(static_libs "${STAX_LLVM_CONFIG}")
    target_link_libraries(stax_shared PRIVATE ${static_libs})
  elseif(TARGET stax_shared)
    target_link_libraries(stax_shared PUBLIC ${STAX_LLVM_LIBS})
  endif()
endfunction()

if(TARGET stax_static AND TARGET stax_shared)
  stax_llvm_link_targets()
else()
  cmake_language(DEFER CALL stax_llvm_link_targets)
endif()
