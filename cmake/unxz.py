# Writes the decompressed contents of an .xz file to stdout: resources/CMakeLists.txt's fallback
# where the xz program is missing (a GPU machine's image; scripts/gpu-check).
import lzma
import shutil
import sys

with lzma.open(sys.argv[1]) as source:
    shutil.copyfileobj(source, sys.stdout.buffer)
