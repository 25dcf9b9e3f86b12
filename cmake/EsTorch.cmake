# LibTorch for the few targets that need it: Debian's CPU build (found with no hints) or a CUDA
# LibTorch through Torch_DIR / CMAKE_PREFIX_PATH. Torch's flags stay on Torch targets only.
#
# Every torch target reuses one precompiled header (es_torch_pch): a torch TU costs ~20 s and
# ~1.2 GB without it. REUSE_FROM needs the same compile definitions on both sides, which is why
# QT_NO_KEYWORDS is set globally and torch targets add no definitions of their own.
find_package(Torch REQUIRED)
message(STATUS "LibTorch ${Torch_VERSION} from ${Torch_DIR}")

add_library(es_torch_pch STATIC ${CMAKE_CURRENT_LIST_DIR}/torch_pch.cpp)
target_link_libraries(es_torch_pch PUBLIC ${TORCH_LIBRARIES})
target_precompile_headers(es_torch_pch PRIVATE <torch/torch.h> <vector> <string> <unordered_map>)

# es_use_torch(<target>): link LibTorch and reuse the shared precompiled header.
function(es_use_torch target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  target_precompile_headers(${target} REUSE_FROM es_torch_pch)
endfunction()
