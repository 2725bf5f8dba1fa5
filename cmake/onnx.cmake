# ONNX import: C code for onnx.proto is generated at build time with protoc-c from the
# onnx.proto that Debian's libonnx-dev installs (nothing generated is committed).
#
# Included from CMakeLists.txt right after the stax_objects OBJECT library is declared, so it
# can add the generated source to it. stax_static, stax_shared and the unit tests do not exist
# yet at that point; the work that needs them is deferred to the end of the directory
# (cmake_language(DEFER)), so CMakeLists.txt needs no extra lines for ONNX.

set(STAX_ONNX_PROTO "/usr/include/onnx/onnx.proto" CACHE FILEPATH
    "onnx.proto to generate the protobuf-c parser from (proto2, package onnx)")
set(STAX_ONNX_NODE_TEST_DATA "/usr/share/libonnx-testdata/data/node" CACHE PATH
    "ONNX backend node tests (model.onnx + test_data_set_*) for the onnx_node_suite test")

find_program(STAX_PROTOC_C NAMES protoc-c protoc-gen-c)
if(NOT STAX_PROTOC_C)
  message(FATAL_ERROR "protoc-c not found: install protobuf-c-compiler (Debian) to build the "
                      "ONNX importer")
endif()
if(NOT EXISTS "${STAX_ONNX_PROTO}")
  message(FATAL_ERROR "${STAX_ONNX_PROTO} not found: install libonnx-dev (Debian) or set "
                      "STAX_ONNX_PROTO to an onnx.proto (proto2 syntax)")
endif()

# libprotobuf-c: pkg-config first, then a plain search.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(STAX_PROTOBUF_C QUIET IMPORTED_TARGET libprotobuf-c)
endif()
if(STAX_PROTOBUF_C_FOUND)
  set(STAX_PROTOBUF_C_LIBRARY PkgConfig::STAX_PROTOBUF_C)
else()
  find_path(STAX_PROTOBUF_C_INCLUDE_DIR protobuf-c/protobuf-c.h)
  find_library(STAX_PROTOBUF_C_LIB NAMES protobuf-c)
  if(NOT STAX_PROTOBUF_C_INCLUDE_DIR OR NOT STAX_PROTOBUF_C_LIB)
    message(FATAL_ERROR "libprotobuf-c not found: install libprotobuf-c-dev (Debian)")
  endif()
  add_library(stax_protobuf_c INTERFACE)
  target_include_directories(stax_protobuf_c INTERFACE ${STAX_PROTOBUF_C_INCLUDE_DIR})
  target_link_libraries(stax_protobuf_c INTERFACE ${STAX_PROTOBUF_C_LIB})
  set(STAX_PROTOBUF_C_LIBRARY stax_protobuf_c)
endif()

# Generated into <build>/generated/onnx/; sources include "onnx/onnx.pb-c.h".
set(STAX_ONNX_GENERATED_ROOT "${PROJECT_BINARY_DIR}/generated")
set(STAX_ONNX_GENERATED_DIR "${STAX_ONNX_GENERATED_ROOT}/onnx")
get_filename_component(STAX_ONNX_PROTO_DIR "${STAX_ONNX_PROTO}" DIRECTORY)
get_filename_component(STAX_ONNX_PROTO_NAME "${STAX_ONNX_PROTO}" NAME_WE)
set(STAX_ONNX_PB_C "${STAX_ONNX_GENERATED_DIR}/${STAX_ONNX_PROTO_NAME}.pb-c.c")
set(STAX_ONNX_PB_H "${STAX_ONNX_GENERATED_DIR}/${STAX_ONNX_PROTO_NAME}.pb-c.h")
if(NOT STAX_ONNX_PROTO_NAME STREQUAL "onnx")
  message(FATAL_ERROR "STAX_ONNX_PROTO must be named onnx.proto (got ${STAX_ONNX_PROTO})")
endif()
add_custom_command(
  OUTPUT "${STAX_ONNX_PB_C}" "${STAX_ONNX_PB_H}"
  COMMAND ${CMAKE_COMMAND} -E make_directory "${STAX_ONNX_GENERATED_DIR}"
  COMMAND ${STAX_PROTOC_C} "--proto_path=${STAX_ONNX_PROTO_DIR}"
          "--c_out=${STAX_ONNX_GENERATED_DIR}" "${STAX_ONNX_PROTO}"
  DEPENDS "${STAX_ONNX_PROTO}"
  COMMENT "Generating the protobuf-c parser for ${STAX_ONNX_PROTO}"
  VERBATIM)

# Generated code is not ours to fix: no warnings (and so no -Werror failures) for that file.
target_sources(stax_objects PRIVATE "${STAX_ONNX_PB_C}" "${STAX_ONNX_PB_H}")
set_source_files_properties("${STAX_ONNX_PB_C}" PROPERTIES GENERATED TRUE COMPILE_OPTIONS "-w")
target_include_directories(stax_objects PRIVATE "${STAX_ONNX_GENERATED_ROOT}")
target_link_libraries(stax_objects PRIVATE ${STAX_PROTOBUF_C_LIBRARY})

# Runs once CMakeLists.txt has defined the libraries and the unit tests.
function(stax_onnx_finish_targets)
  target_link_libraries(stax_static PUBLIC ${STAX_PROTOBUF_C_LIBRARY})
  if(STAX_STATIC_DEPS)  # cmake/static_deps.cmake: a self-contained libstax.so
    stax_static_archive(protobuf_c_archive protobuf-c "libprotobuf-c-dev")
    target_link_libraries(stax_shared PRIVATE "${protobuf_c_archive}")
  else()
    target_link_libraries(stax_shared PRIVATE ${STAX_PROTOBUF_C_LIBRARY})
  endif()
  # The importer's unit test packs protobuf-c structs to build models.
  if(TARGET test_onnx_import)
    target_include_directories(test_onnx_import PRIVATE "${STAX_ONNX_GENERATED_ROOT}")
  endif()

  # The ONNX backend node tests, run through import + VM, compared with the stored outputs.
  if(NOT EXISTS ${PROJECT_SOURCE_DIR}/tests/onnx/node_suite.c)
    return()
  endif()
  add_executable(onnx_node_suite ${PROJECT_SOURCE_DIR}/tests/onnx/node_suite.c)
  target_include_directories(onnx_node_suite PRIVATE ${PROJECT_SOURCE_DIR}/src
                             "${STAX_ONNX_GENERATED_ROOT}")
  target_link_libraries(onnx_node_suite PRIVATE stax_static)
  add_test(NAME onnx_node_suite
           COMMAND onnx_node_suite --data "${STAX_ONNX_NODE_TEST_DATA}"
                   --exceptions "${PROJECT_SOURCE_DIR}/tests/onnx/node_exceptions.txt")
  # 77: the test data is not installed.
  set_tests_properties(onnx_node_suite PROPERTIES TIMEOUT 1800 SKIP_RETURN_CODE 77)
  # The same models through the JIT tier in verify mode: every compiled segment is also
  # interpreted and compared, and the outputs checked against the stored ones. Kernels go to
  # an object cache in the build tree (not the user's), so a rerun loads them.
  add_test(NAME onnx_node_suite_jit
           COMMAND onnx_node_suite --jit --data "${STAX_ONNX_NODE_TEST_DATA}"
                   --exceptions "${PROJECT_SOURCE_DIR}/tests/onnx/node_exceptions.txt")
  set_tests_properties(onnx_node_suite_jit PROPERTIES TIMEOUT 1800 SKIP_RETURN_CODE 77
                       ENVIRONMENT "STAX_JIT_CACHE_DIR=${CMAKE_BINARY_DIR}/node_suite_jit_cache")
  # The test data the installed onnx package ships (simple, pytorch-converted,
  # pytorch-operator, and the light models staged with onnx's runner's inputs), through the
  # interpreter and through the JIT in verify mode (tests/onnx/shipped_suite.py).
  add_test(NAME onnx_shipped_suite
           COMMAND ${STAX_PYTHON} ${PROJECT_SOURCE_DIR}/tests/onnx/shipped_suite.py
                   $<TARGET_FILE:onnx_node_suite> ${CMAKE_BINARY_DIR}/onnx_shipped)
  set_tests_properties(onnx_shipped_suite PROPERTIES TIMEOUT 1800 SKIP_RETURN_CODE 77)
  add_test(NAME onnx_shipped_suite_jit
           COMMAND ${STAX_PYTHON} ${PROJECT_SOURCE_DIR}/tests/onnx/shipped_suite.py
                   $<TARGET_FILE:onnx_node_suite> ${CMAKE_BINARY_DIR}/onnx_shipped_jit --jit)
  set_tests_properties(onnx_shipped_suite_jit PROPERTIES TIMEOUT 1800 SKIP_RETURN_CODE 77
                       ENVIRONMENT "STAX_JIT_CACHE_DIR=${CMAKE_BINARY_DIR}/shipped_jit_cache")
endfunction()
cmake_language(DEFER CALL stax_onnx_finish_targets)
