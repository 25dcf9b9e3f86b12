# cmake -DFILE=<path> -DSHA256=<hex> -P VerifySha256.cmake: fails the build if the file's hash
# differs (a damaged or edited vendored corpus must not silently change the default run).
file(SHA256 "${FILE}" actual)
if(NOT actual STREQUAL SHA256)
  file(REMOVE "${FILE}")
  message(FATAL_ERROR "${FILE}: sha256 ${actual}, expected ${SHA256}")
endif()
