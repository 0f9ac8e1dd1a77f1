# cmake --install: libraries, public headers and an exported optimus-config.cmake for find_package(optimus CONFIG).
include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS optimus_core optimus_config optimus_comm optimus_sim optimus_cuda optimus_grid optimus_device optimus_layers
                optimus_pipeline optimus_model optimus_checkpoint optimus_plan optimus_reference optimus_programs optimus_sweep optimus
        EXPORT optimus-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(_optimus_header_excludes)
if(NOT OPTIMUS_WITH_MPI)
  list(APPEND _optimus_header_excludes PATTERN "mpi_communicator.hpp" EXCLUDE)
endif()
if(NOT OPTIMUS_HAVE_CUDA)
  # The backend's headers include CUDA's (as tests/headers leaves them out); its entry points (cuda/device.hpp) are
  # there in every build.
  list(APPEND _optimus_header_excludes REGEX "(cuda/(runtime|lt_gemm)|core/cuda_check)\\.hpp$" EXCLUDE)
endif()
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp" ${_optimus_header_excludes})
install(EXPORT optimus-targets NAMESPACE optimus:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/optimus)

configure_package_config_file(cmake/optimus-config.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/optimus-config.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/optimus)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/optimus-config-version.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/optimus-config.cmake ${CMAKE_CURRENT_BINARY_DIR}/optimus-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/optimus)
