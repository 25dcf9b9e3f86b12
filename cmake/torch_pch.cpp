// Compiles the shared LibTorch precompiled header once; see cmake/EsTorch.cmake.
