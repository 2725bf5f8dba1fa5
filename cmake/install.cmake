# Install rules: the libraries, the public headers, the `stax` program, a pkg-config file and a
# CMake package (cmake --install BUILD --prefix PREFIX). The static library needs LLVM (when
# the JIT is built), protobuf-c, threads and libm at link time: stax.pc lists them as
# Libs.private (pkg-config --static --libs stax) and staxConfig.cmake puts them on stax::stax.
# Runs at the end of the top-level CMakeLists.txt, once llvm.cmake and onnx.cmake have found
# their libraries.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS stax_static stax_shared
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS stax_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/stax DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# The static library's own dependencies, as full paths (CMake) and as linker flags (pkg-config).
set(stax_private_libs ${STAX_LLVM_LIBS})
if(STAX_PROTOBUF_C_FOUND)
  list(APPEND stax_private_libs ${STAX_PROTOBUF_C_LINK_LIBRARIES})
elseif(STAX_PROTOBUF_C_LIB)
  list(APPEND stax_private_libs ${STAX_PROTOBUF_C_LIB})
endif()
set(STAX_CONFIG_PRIVATE_LIBS "${stax_private_libs}")
set(STAX_PC_LIBS_PRIVATE "")
foreach(lib ${stax_private_libs})
  string(APPEND STAX_PC_LIBS_PRIVATE "${lib} ")
endforeach()
string(APPEND STAX_PC_LIBS_PRIVATE "-lpthread -lm")
if(CMAKE_DL_LIBS)
  string(APPEND STAX_PC_LIBS_PRIVATE " -l${CMAKE_DL_LIBS}")
endif()

# Both files find the prefix from where they are installed, so `--prefix` can move it.
file(RELATIVE_PATH STAX_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
file(RELATIVE_PATH STAX_CONFIG_UP "/p/${CMAKE_INSTALL_LIBDIR}/cmake/stax" "/p")
configure_file(${PROJECT_SOURCE_DIR}/cmake/stax.pc.in ${PROJECT_BINARY_DIR}/stax.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/staxConfig.cmake.in
               ${PROJECT_BINARY_DIR}/staxConfig.cmake @ONLY)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/staxConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/stax.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
install(FILES ${PROJECT_BINARY_DIR}/staxConfig.cmake ${PROJECT_BINARY_DIR}/staxConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/stax)
