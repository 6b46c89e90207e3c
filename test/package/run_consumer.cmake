# SPDX-License-Identifier: Apache-2.0
# Builds test/package/consumer against gradcomp and runs it; prints "consumer test: passed" at the end.
#   MODE=find_package      install GRADCOMP_BINARY_DIR into WORK_DIR/prefix, then find_package
#   MODE=minimal           configure GRADCOMP_SOURCE_DIR as a machine with only a compiler and
#                          CMake would (every optional package hidden), build, install, then
#                          find_package
#   MODE=add_subdirectory  the consumer pulls in GRADCOMP_SOURCE_DIR
# CONSUMER_HIDE: packages hidden from the consumer's configure (CMAKE_DISABLE_FIND_PACKAGE_<P>),
# as on a machine without them; EXPECT: a regex the consumer's configure output must match (the
# components it got). MPIEXEC runs consumer_mpi on 2 ranks when it was built. With PYTHON and
# PYTHON_INSTALL_DIR, the installed gradcomp.torch is imported from the prefix; with PKG_CONFIG,
# main.cpp is also compiled with `pkg-config --cflags --libs gradcomp` from the prefix. With
# EXAMPLES_SOURCE_DIR (find_package only), the numbered examples are configured alone against the
# prefix as a user who copied them would (LibTorch hidden: 02 is left out), built, and those that
# need one process run.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK_DIR}/prefix")
if(MODE STREQUAL "minimal")
  set(hidden MPI Catch2 BLAS Torch benchmark CLI11 nlohmann_json xtensor pybind11 Python3
             CUDAToolkit ZLIB)
  set(hide_args -DGRADCOMP_PYTHON=/nonexistent/python3)
  foreach(p IN LISTS hidden)
    list(APPEND hide_args -DCMAKE_DISABLE_FIND_PACKAGE_${p}=ON)
  endforeach()
  run(${CMAKE_COMMAND} -S "${GRADCOMP_SOURCE_DIR}" -B "${WORK_DIR}/gradcomp-build" ${hide_args})
  message("${run_output}")
  foreach(line "Catch2 \\(v2 or v3\\) not found; the tests are not built"
               "MPI not found or disabled" "Google Benchmark not found; benchmarks not built")
    if(NOT run_output MATCHES "${line}")
      message(FATAL_ERROR "the minimal configure did not say '${line}'")
    endif()
  endforeach()
  run(${CMAKE_COMMAND} --build "${WORK_DIR}/gradcomp-build")
  run(${CMAKE_COMMAND} --install "${WORK_DIR}/gradcomp-build" --prefix "${prefix}")
  set(MODE find_package)
elseif(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} --install "${GRADCOMP_BINARY_DIR}" --prefix "${prefix}")
endif()

if(MODE STREQUAL "find_package")
  if(PYTHON_INSTALL_DIR) # the installed gradcomp.torch imports from the prefix alone
    run(${CMAKE_COMMAND} -E env "PYTHONPATH=${prefix}/${PYTHON_INSTALL_DIR}"
        ${PYTHON} -c "import gradcomp, gradcomp.torch; assert gradcomp.__file__.startswith('${WORK_DIR}')")
  endif()
  set(consumer_args -DCMAKE_PREFIX_PATH=${prefix} -DCONSUMER_MODE=find_package)
  foreach(p IN LISTS CONSUMER_HIDE)
    list(APPEND consumer_args -DCMAKE_DISABLE_FIND_PACKAGE_${p}=ON)
  endforeach()
else()
  set(consumer_args -DCONSUMER_MODE=add_subdirectory -DGRADCOMP_SOURCE_DIR=${GRADCOMP_SOURCE_DIR})
endif()
run(${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build" ${consumer_args})
if(EXPECT AND NOT run_output MATCHES "${EXPECT}")
  message(FATAL_ERROR "the consumer's configure does not match '${EXPECT}':\n${run_output}")
endif()
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
message("${run_output}")
if(EXISTS "${WORK_DIR}/build/consumer_blas")
  run("${WORK_DIR}/build/consumer_blas")
  message("${run_output}")
endif()
if(EXISTS "${WORK_DIR}/build/consumer_mpi" AND MPIEXEC)
  run(${MPIEXEC} -n 2 "${WORK_DIR}/build/consumer_mpi")
  message("${run_output}")
  if(NOT run_output MATCHES "consumer_mpi: ok \\(2 ranks\\)")
    message(FATAL_ERROR "consumer_mpi did not report ok")
  endif()
endif()
if(PKG_CONFIG AND MODE STREQUAL "find_package") # a Makefile user's compile line
  run(${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${prefix}/share/pkgconfig"
      ${PKG_CONFIG} --cflags --libs gradcomp)
  string(STRIP "${run_output}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run(${CXX} "${CONSUMER_SOURCE_DIR}/main.cpp" -o "${WORK_DIR}/consumer_pc" ${flags})
  run("${WORK_DIR}/consumer_pc")
  message("pkg-config: ${run_output}")
endif()
if(EXAMPLES_SOURCE_DIR AND MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} -S "${EXAMPLES_SOURCE_DIR}" -B "${WORK_DIR}/examples"
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_DISABLE_FIND_PACKAGE_Torch=ON)
  run(${CMAKE_COMMAND} --build "${WORK_DIR}/examples")
  foreach(example 01_compress_only/gradcomp_example_compress_only
                  04_custom_compressor/gradcomp_example_custom_compressor)
    run("${WORK_DIR}/examples/${example}")
    message("examples alone: ${example} ran")
  endforeach()
  if(MPIEXEC)
    foreach(example 03_mpi_vector/gradcomp_example_mpi_vector
                    05_custom_transport/gradcomp_example_custom_transport
                    08_coded_exchange/gradcomp_example_coded_exchange
                    09_sparse_allreduce/gradcomp_example_sparse_allreduce
                    10_training_loop/gradcomp_example_training_loop)
      if(NOT EXISTS "${WORK_DIR}/examples/${example}")
        message(FATAL_ERROR "examples alone: ${example} was not built (gradcomp::mpi not found)")
      endif()
    endforeach()
  endif()
endif()
message("consumer test: passed")
