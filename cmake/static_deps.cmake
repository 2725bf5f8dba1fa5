# STAX_STATIC_DEPS: a self-contained libstax.so, for the Python wheel (setup.py turns it on for
# `pip install .` and `pip wheel .`; docs/python.md "The wheel").
#
# libstax.so then carries LLVM (the component archives the JIT needs, not the whole libLLVM),
# protobuf-c, zlib, zstd and the C++ runtime LLVM is written against, all linked from their
# static archives with their symbols kept local (--exclude-libs), so a process that also loads
# another LLVM or libstdc++ (onnxruntime, torch) sees no clash. What it still needs from the
# system is glibc (libc, libm, and libdl/libpthread/librt as their stubs) and libgcc_s (C++
# unwinding), which every Linux has and the manylinux policies allow.
#
# Only stax_shared changes: libstax.a cannot hold other archives, so its users (the unit tests,
# the CLI of the top-level build, the installed CMake package) link LLVM as before.
#
# Included from CMakeLists.txt before onnx.cmake and llvm.cmake, which call the helper below.

option(STAX_STATIC_DEPS
       "Link LLVM, protobuf-c, zlib, zstd and libstdc++ statically into libstax.so" OFF)

# stax_static_archive(VAR NAME HINT): the full path of libNAME.a in VAR, or a configure error
# naming the Debian package that has it (HINT). find_library is given only the archive's file
# name, so a shared library of the same name is never taken by mistake.
function(stax_static_archive var name hint)
  find_library(STAX_STATIC_${name} NAMES lib${name}.a)
  if(NOT STAX_STATIC_${name})
    # The compiler's own directories (libstdc++.a lives under the GCC version's folder).
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=lib${name}.a
                    OUTPUT_VARIABLE found OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(found AND IS_ABSOLUTE "${found}" AND EXISTS "${found}")
      set(STAX_STATIC_${name} "${found}" CACHE FILEPATH "lib${name}.a" FORCE)
    endif()
  endif()
  if(NOT STAX_STATIC_${name})
    message(FATAL_ERROR "STAX_STATIC_DEPS needs lib${name}.a: install ${hint}, or configure "
                        "with -DSTAX_STATIC_DEPS=OFF (libstax.so then links the shared one)")
  endif()
  set(${var} "${STAX_STATIC_${name}}" PARENT_SCOPE)
endfunction()

# stax_static_llvm_libs(VAR LLVM_CONFIG): the LLVM component archives the JIT uses, in link
# order, followed by the static archives of the system libraries they call (zlib, zstd) and
# of libstdc++.
function(stax_static_llvm_libs var llvm_config)
  # The components behind the C API calls of src/jit (llvm-c/Core.h, LLJIT.h, Orc.h,
  # TargetMachine.h, Analysis.h, Transforms/PassBuilder.h) and the host's code generator.
  set(components core orcjit passes native analysis target)
  execute_process(COMMAND "${llvm_config}" --link-static --libfiles ${components}
                  OUTPUT_VARIABLE files OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc
                  ERROR_VARIABLE error)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "STAX_STATIC_DEPS: ${llvm_config} has no static libraries for "
                        "${components} (${error}); Debian's llvm-19-dev ships them")
  endif()
  separate_arguments(files UNIX_COMMAND "${files}")
  execute_process(COMMAND "${llvm_config}" --link-static --system-libs
                  OUTPUT_VARIABLE system OUTPUT_STRIP_TRAILING_WHITESPACE)
  separate_arguments(system UNIX_COMMAND "${system}")
  set(libs ${files})
  foreach(item ${system})
    # zlib and zstd back LLVM's compressed sections; -lrt -ldl -lm are glibc's. The rest
    # (libxml2, libz3, libffi, libtinfo) serve components the JIT does not link (the
    # Windows manifest tool, the Z3 constraint solver, the interpreter, the line editor).
    if(item STREQUAL "-lz")
      stax_static_archive(zlib z "zlib1g-dev")
      list(APPEND libs "${zlib}")
    elseif(item STREQUAL "-lzstd")
      stax_static_archive(zstd zstd "libzstd-dev")
      list(APPEND libs "${zstd}")
    endif()
  endforeach()
  stax_static_archive(cxx stdc++ "the C++ compiler's libstdc++ (libstdc++-12-dev)")
  list(APPEND libs "${cxx}" ${CMAKE_DL_LIBS} rt m)
  set(${var} "${libs}" PARENT_SCOPE)
endfunction()

# Keeps every archive's symbols out of libstax.so's dynamic symbol table (stax's own objects
# are not in an archive, so only they are exported), and drops the archives' code that no
# exported function reaches (LLVM's archives are built with a section per function): 56 MB
# instead of 64 MB before stripping, 43 MB after.
function(stax_static_hide_archive_symbols)
  if(STAX_STATIC_DEPS AND TARGET stax_shared)
    target_link_options(stax_shared PRIVATE "LINKER:--exclude-libs,ALL" "LINKER:--gc-sections")
  endif()
endfunction()
cmake_language(DEFER CALL stax_static_hide_archive_symbols)
