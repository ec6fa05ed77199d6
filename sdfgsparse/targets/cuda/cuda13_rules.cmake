# sdfgsparse: CUDA build rules for DaCe 1.0.2 (see sdfgsparse/targets/cuda/compat.py).
#
# DaCe passes this file as -DCMAKE_USER_MAKE_RULES_OVERRIDE_CUDA=<this file>; CMake reads
# it inside enable_language(CUDA), i.e. *after* DaCe's CMakeLists.txt ran
# set(CMAKE_CUDA_STANDARD 14), in the same directory scope, so what is set here wins.
# The compiler is known by now (CMAKE_CUDA_COMPILER_VERSION).

# 1. C++17 for CUDA sources: Thrust and CUB of CUDA >= 12.x refuse C++14. A -std=c++17
#    in compiler.cuda.args loses to CMake's own later -std=c++14, and
#    -DCMAKE_CUDA_STANDARD=17 loses to DaCe's set().  nvcc supports C++17 since CUDA 11.
if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 11)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()

# 2. Force-include (nvcc --pre-include, i.e. -include) the compatibility header in
#    every CUDA source of the program: it maps names that CUDA 13 removed and DaCe's
#    runtime headers still use (inert for older nvcc). Not in CMake's own try-compile projects (compiler checks), which read this
#    file too: they need nothing of it.
if(NOT CMAKE_PROJECT_NAME STREQUAL "CMAKE_TRY_COMPILE")
  # SDFGSPARSE_CUDA_COMPAT: a fingerprint of this file and the header, passed on the
  # command line so that changing them reconfigures (read here so CMake sees it used)
  set(_sdfgsparse_cuda_compat "${SDFGSPARSE_CUDA_COMPAT}")
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:--pre-include=${CMAKE_CURRENT_LIST_DIR}/sdfgsparse_cuda_compat.h>")
endif()
