# SPDX-License-Identifier: Apache-2.0
# Packages (CPack), from a configured and built tree:
#   cpack -G DEB   gradcomp-dev_<version>_all.deb      headers, CMake package, gradcomp.pc, docs
#                  gradcomp-tools_<version>_<arch>.deb the tools that were built (bin/)
#   cpack -G TGZ   gradcomp-<version>-Linux.tar.gz      the same files under one prefix
# The Python package is installed with pip (pyproject.toml), not packaged here.
set(CPACK_PACKAGE_NAME gradcomp)
set(CPACK_PACKAGE_VENDOR "The gradcomp developers")
set(CPACK_PACKAGE_CONTACT "The gradcomp developers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Gradient compression for data-parallel training (header-only C++20)")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_INSTALL_DIRECTORY gradcomp)
set(CPACK_PACKAGE_FILE_NAME gradcomp-${PROJECT_VERSION}-${CMAKE_SYSTEM_NAME})
set(CPACK_GENERATOR TGZ DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

get_property(_gradcomp_tools GLOBAL PROPERTY GRADCOMP_INSTALLED_TOOLS)
set(CPACK_COMPONENTS_ALL dev)
if(_gradcomp_tools)
  list(APPEND CPACK_COMPONENTS_ALL tools)
endif()
set(CPACK_COMPONENT_DEV_DISPLAY_NAME "gradcomp headers, CMake package and pkg-config file")
set(CPACK_COMPONENT_TOOLS_DISPLAY_NAME "gradcomp command-line tools")
set(CPACK_ARCHIVE_COMPONENT_INSTALL OFF) # one tarball with every component

# Debian: one package per component
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "The gradcomp developers")
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME gradcomp-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "libmpich-dev | mpi-default-dev, libblas-dev, pkgconf")
set(CPACK_DEBIAN_DEV_DESCRIPTION
    "Gradient compression for data-parallel training (header-only C++20)
 Compressors with error feedback (top-k, DGC, threshold estimators, random-k, QSGD,
 TernGrad, signSGD, PowerSGD), MPI transports (ring, sparse allgather, gTop-k, Ok-Topk,
 parameter server, hierarchical ring, coded multicast) and a merge scheduler. Provides
 find_package(gradcomp) and pkg-config's gradcomp.")
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME gradcomp-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION science)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SHLIBDEPS ON) # libtorch, MPICH, ... from dpkg-shlibdeps
set(CPACK_DEBIAN_TOOLS_DESCRIPTION
    "gradcomp's command-line tools
 gradcomp-train (data-parallel training over MPI), gradcomp-compress, gradcomp-plan,
 gradcomp-cost, gradcomp-hybrid-plan and gradcomp-demo.")
include(CPack)
