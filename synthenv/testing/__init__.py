"""Tools for checking synthenv itself, importable by tests and by ``synthenv doctor``.

- ``syncguard``: fail (or count) ops that would make the host wait for a device.
- ``sanitizer``: synthenv's C sources as one executable under AddressSanitizer and UBSan.
"""
