"""The one thing pyproject.toml cannot declare: the verifier's hot loops in C.

`ledger.crypto._native` runs `verify_rows`' fast path and the Merkle levels'
hashing in C (see its source).
It is optional: where it cannot be built (no C compiler, no OpenSSL headers)
the ledger installs without it and verifies with the same checks in Python.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ledger.crypto._native",
            ["ledger/crypto/_native.c"],
            libraries=["crypto"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        )
    ]
)
