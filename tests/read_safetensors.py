#!/usr/bin/env python3
"""Independent safetensors reader (stdlib only) used by tst_safetensors.

Parses a file per the public spec (https://github.com/huggingface/safetensors) without sharing
any code with the C++ implementation, and prints one JSON document:
  {"metadata": {...}, "tensors": [{"name", "dtype", "shape", "sha256"}, ...]}  (sorted by name)
Exits non-zero with a message on stderr if the file breaks the spec.
"""
import hashlib
import json
import struct
import sys

DTYPE_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
               "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1}
ENTRY_KEYS = {"dtype", "shape", "data_offsets"}


def fail(message):
    print("read_safetensors: " + message, file=sys.stderr)
    sys.exit(1)


def no_duplicates(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            fail("duplicate key %r" % key)
        result[key] = value
    return result


def main(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        fail("header length past end of file")
    header = json.loads(blob[8:8 + n].decode("utf-8"), object_pairs_hook=no_duplicates)
    data = blob[8 + n:]
    if not isinstance(header, dict):
        fail("header is not an object")

    metadata = header.pop("__metadata__", {})
    if not all(isinstance(v, str) for v in metadata.values()):
        fail("metadata values must be strings")

    tensors, spans = [], []
    for name, entry in header.items():
        if set(entry) != ENTRY_KEYS:
            fail("tensor %r has keys %r" % (name, sorted(entry)))
        dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        count = 1
        for dim in shape:
            if not isinstance(dim, int) or dim < 0:
                fail("tensor %r has a bad shape" % name)
            count *= dim
        if end - begin != count * DTYPE_SIZES[dtype] or not 0 <= begin <= end <= len(data):
            fail("tensor %r has bad data_offsets" % name)
        spans.append((begin, end))
        tensors.append({"name": name, "dtype": dtype, "shape": shape,
                        "sha256": hashlib.sha256(data[begin:end]).hexdigest()})

    position = 0
    for begin, end in sorted(spans):
        if begin != position:
            fail("data section has a hole or an overlap at byte %d" % begin)
        position = end
    if position != len(data):
        fail("data section has trailing bytes")

    tensors.sort(key=lambda t: t["name"])
    json.dump({"metadata": metadata, "tensors": tensors}, sys.stdout, sort_keys=True)
    print()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: read_safetensors.py FILE")
    main(sys.argv[1])
