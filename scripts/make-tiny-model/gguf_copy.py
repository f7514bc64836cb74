"""Shared by the mismatched-fixture scripts: a GGUF writer that starts as a
copy of another GGUF's metadata, for writing a variant of that file, and
the calls that write it out."""

import gguf


def copy_metadata(src: str, dst: str, overrides: dict | None = None) -> tuple[gguf.GGUFReader, gguf.GGUFWriter]:
    """Reads `src` and returns it with a writer to `dst` holding every key of
    `src` (values in `overrides` replaced); the caller adds the tensors."""
    overrides = overrides or {}
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, overrides.get(name, field.contents()), vtype, sub_type=sub)
    return reader, writer


def write(writer: gguf.GGUFWriter) -> None:
    """Writes the header, the metadata and the tensors added, and closes."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
