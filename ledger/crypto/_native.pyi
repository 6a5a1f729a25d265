# The verifier's hot loops in C (ledger/crypto/_native.c).
from collections.abc import Callable
from typing import Any

def scan(
    rows: list[Any],
    index: int,
    end: int,
    first_leaf: int,
    key: bytes,
    low: int,
    high: int,
    clock: list[Any],
    names: dict[object, tuple[str, bytes]],
    name_of: Callable[[object], tuple[str, bytes] | None],
    topics: dict[str, bytes],
    topic_of: Callable[[str], bytes | None],
    lasts: dict[str, tuple[int, bytes]],
    firsts: dict[str, tuple[int, int, bytes]],
    hashes: list[bytes],
    verify: Callable[[bytes, bytes, bytes], bool] | int | None,
    public_key: bytes,
    domain: bytes,
    uuid_names: dict[int, tuple[str, bytes]],
) -> int: ...
def node_level(level: list[bytes]) -> list[bytes]: ...
def plain_json(value: object) -> bool: ...
