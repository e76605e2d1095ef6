"""Reads the metadata key/values of a GGUF file (v2/v3), enough for the
tokenizer tests to rebuild a vocabulary in Python. Stops before tensor data."""
import struct

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def _read(f, fmt):
    size = struct.calcsize(fmt)
    return struct.unpack(fmt, f.read(size))[0]


def _string(f):
    n = _read(f, "<Q")
    return f.read(n).decode("utf-8", errors="surrogateescape")


def _value(f, typ):
    if typ == 8:
        return _string(f)
    if typ == 9:
        elem, count = _read(f, "<I"), _read(f, "<Q")
        if elem in _SCALARS:
            fmt = _SCALARS[elem]
            size = struct.calcsize(fmt)
            data = f.read(size * count)
            return list(struct.unpack("<" + fmt[1:] * count, data))
        return [_value(f, elem) for _ in range(count)]
    return _read(f, _SCALARS[typ])


def read_gguf_metadata(path):
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        version = _read(f, "<I")
        if version < 2:
            raise ValueError(f"GGUF version {version} not supported")
        _read(f, "<Q")  # tensor count
        n_kv = _read(f, "<Q")
        meta = {}
        for _ in range(n_kv):
            key = _string(f)
            meta[key] = _value(f, _read(f, "<I"))
        return meta
