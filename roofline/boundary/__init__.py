"""The boundary between roofline and what users pass in (see SECURITY.md).

* :mod:`roofline.boundary.limits`: every limit on input sizes and values, in one place;
* :mod:`roofline.boundary.inputs`: reading untrusted files (regular files only, bounded, UTF-8, strict YAML);
* :mod:`roofline.boundary.outputs`: writing output files (checked first, only regular files replaced);
* :mod:`roofline.boundary.arguments`: the types of Python API arguments (a rate, a count, a path, a name).

Standard library only, so the CLI can import it at start-up.
"""
