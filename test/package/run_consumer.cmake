# SPDX-License-Identifier: Apache-2.0
# Builds test/package/consumer against gradcomp, either installed into a scratch prefix
# (MODE=find_package) or pulled in with add_subdirectory, then runs it. With PYTHON and
# PYTHON_INSTALL_DIR, also imports the installed gradcomp.torch package from the prefix.
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
if(MODE STREQUAL "find_package")
  run(${CMAKE_COMMAND} --install "${GRADCOMP_BINARY_DIR}" --prefix "${WORK_DIR}/prefix")
  if(PYTHON_INSTALL_DIR) # the installed gradcomp.torch imports from the prefix alone
    run(${CMAKE_COMMAND} -E env "PYTHONPATH=${WORK_DIR}/prefix/${PYTHON_INSTALL_DIR}"
        ${PYTHON} -c "import gradcomp, gradcomp.torch; assert gradcomp.__file__.startswith('${WORK_DIR}')")
  endif()
  run(${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build"
      -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCONSUMER_MODE=find_package)
else()
  run(${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build"
      -DCONSUMER_MODE=add_subdirectory -DGRADCOMP_SOURCE_DIR=${GRADCOMP_SOURCE_DIR})
endif()
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
