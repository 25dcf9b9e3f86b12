# LibTorch for the few targets that need it: Debian's CPU build (found with no hints) or a CUDA
# LibTorch through Torch_DIR / CMAKE_PREFIX_PATH. Torch's flags stay on Torch targets only.
#
# Every torch target reuses one precompiled header (es_torch_pch): a torch TU costs ~20 s and
# ~1.2 GB without it. REUSE_FROM needs the same compile definitions on both sides, which is why
# QT_NO_KEYWORDS is set globally and torch targets add no definitions of their own.
find_package(Torch REQUIRED)
message(STATUS "LibTorch ${Torch_VERSION} from ${Torch_DIR}")
# PyPI's 2.x wheels are built as C++20, and their headers lay some classes out differently under
# C++17: a C++17 build against torch 2.15 crashed in Module::named_parameters (valgrind: invalid
# reads inside libtorch_cpu). Compile as they were compiled; Debian's 1.13 stays on C++17.
if(Torch_VERSION VERSION_GREATER_EQUAL 2.10)
  set(CMAKE_CXX_STANDARD 20)
endif()

# PyPI's torch wheel (scripts/setup --cuda): libtorch_cuda.so finds the CUDA libraries of the
# nvidia-* wheels beside it through its own RPATH at run time, but the linker looks for them in the
# system paths, where the CUDA toolkit's older NCCL lacks symbols it needs (undefined ncclSignal).
# Point the linker at the wheel's copies.
get_filename_component(es_torch_package "${Torch_DIR}/../../.." ABSOLUTE)
file(GLOB es_wheel_cuda_libs "${es_torch_package}/../nvidia/*/lib")
foreach(dir IN LISTS es_wheel_cuda_libs)
  add_link_options("LINKER:-rpath-link,${dir}")
endforeach()

add_library(es_torch_pch STATIC ${CMAKE_CURRENT_LIST_DIR}/torch_pch.cpp)
target_link_libraries(es_torch_pch PUBLIC ${TORCH_LIBRARIES})
target_precompile_headers(es_torch_pch PRIVATE <torch/torch.h> <vector> <string> <unordered_map>)

# es_use_torch(<target>): link LibTorch and reuse the shared precompiled header.
function(es_use_torch target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  target_precompile_headers(${target} REUSE_FROM es_torch_pch)
endfunction()
