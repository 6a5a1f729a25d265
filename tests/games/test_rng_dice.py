"""Provably fair dice: known answers, visible rejection, refusal of bad seeds, uniformity."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import Counter
from collections.abc import Sequence
from itertools import product
from pathlib import Path
from typing import Any

import pytest

import ledger.rng
from ledger.rng.dice import (
    Sampler,
    byte_stream,
    commitment,
    throw,
    throw_message,
    throw_trace,
    uniform,
    verify_throw,
)

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(ledger.rng.__file__).parent / "vectors.json").read_text(encoding="utf-8")
)["vectors"]
DOMAIN = b"casino-ledger/dice/v1\n"


def block(seed: bytes, message: bytes, i: int) -> bytes:
    """Block i of a stream, recomputed here with the stdlib, from the spec."""
    return hmac.new(seed, message + b"\n" + str(i).encode(), hashlib.sha256).digest()


def ids(vector: dict[str, Any]) -> str:
    return f"{vector['round_id']}#{vector['throw_counter']}"


# -- known answers -------------------------------------------------------------------------


def test_a_dozen_vectors_some_with_rejection() -> None:
    assert len(VECTORS) >= 12
    assert any(v["rejected_positions"] for v in VECTORS)
    assert any(v["rejected_positions"][:1] == [0] for v in VECTORS)
    assert any(len(v["rejected_positions"]) >= 2 for v in VECTORS)


@pytest.mark.parametrize("vector", VECTORS, ids=ids)
def test_vector(vector: dict[str, Any]) -> None:
    seed = bytes.fromhex(vector["seed"])
    round_id, counter = vector["round_id"], vector["throw_counter"]
    dice = tuple(vector["dice"])
    assert commitment(seed) == vector["commitment"] == hashlib.sha256(seed).hexdigest()
    assert throw(seed, round_id, counter) == dice
    trace = throw_trace(seed, round_id, counter)
    assert trace.dice == dice
    assert trace.bytes_read.hex() == vector["bytes_read"]
    assert list(trace.rejected_positions) == vector["rejected_positions"]
    assert verify_throw(seed, vector["commitment"], round_id, counter, vector["dice"])
    message = throw_message(round_id, counter)
    assert (message + b"\n0").hex() == vector["block0_message_hex"]
    assert message == DOMAIN + round_id.encode() + b"\n" + str(counter).encode()


@pytest.mark.parametrize("vector", VECTORS, ids=ids)
def test_vector_from_raw_hmac(vector: dict[str, Any]) -> None:
    """The recorded bytes are the HMAC's, rejected exactly where >= 252."""
    seed = bytes.fromhex(vector["seed"])
    message = DOMAIN + vector["round_id"].encode() + b"\n" + str(vector["throw_counter"]).encode()
    read = bytes.fromhex(vector["bytes_read"])
    assert block(seed, message, 0).startswith(read)
    rejected = vector["rejected_positions"]
    assert [i for i, b in enumerate(read) if b >= 252] == rejected
    assert [b % 6 + 1 for i, b in enumerate(read) if i not in rejected] == vector["dice"]


def test_rejection_changes_the_dice() -> None:
    """Where a byte is rejected, naive `b % 6` on the first three bytes would differ."""
    for vector in (v for v in VECTORS if v["rejected_positions"]):
        read = bytes.fromhex(vector["bytes_read"])
        for position in vector["rejected_positions"]:
            assert read[position] >= 252
        assert len(read) == 3 + len(vector["rejected_positions"])
        assert [b % 6 + 1 for b in read[:3]] != vector["dice"]


def test_fast_path_agrees_with_trace() -> None:
    seed = hashlib.sha256(b"fast path").digest()
    for counter in range(3000):
        assert throw(seed, "r", counter) == throw_trace(seed, "r", counter).dice


# -- verification ------------------------------------------------------------------------


def test_verify_throw_rejects_every_wrong_claim() -> None:
    vector = VECTORS[0]
    seed = bytes.fromhex(vector["seed"])
    c, r, n, d = vector["commitment"], vector["round_id"], vector["throw_counter"], vector["dice"]
    assert verify_throw(seed, c, r, n, d)
    assert verify_throw(seed, c, r, n, tuple(d))
    other = [d[0] % 6 + 1, d[1], d[2]]
    assert not verify_throw(seed, c, r, n, other)
    assert not verify_throw(seed, c, r, n, d[:2])
    assert not verify_throw(seed, c, r, n, [*d, 1])
    assert not verify_throw(seed, "0" * 64, r, n, d)
    assert not verify_throw(seed, c + "00", r, n, d)
    assert not verify_throw(seed, "é" * 64, r, n, d)
    assert not verify_throw(bytes(31), c, r, n, d)
    assert not verify_throw(b"\x01" + seed[1:], c, r, n, d)
    # The claim binds round and counter: the neighbours' dice differ from these.
    assert throw(seed, r, n + 1) != tuple(d)
    assert not verify_throw(seed, c, r, n + 1, d)
    assert throw(seed, r + "x", n) != tuple(d)
    assert not verify_throw(seed, c, r + "x", n, d)
    # True == 1 in Python, but a bool is not a die.
    assert d[0] == 1
    assert not verify_throw(seed, c, r, n, [True, d[1], d[2]])


# -- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 16, 31, 33, 64])
def test_seed_not_32_bytes_is_refused(length: int) -> None:
    seed = bytes(length)
    with pytest.raises(ValueError, match="32 bytes"):
        commitment(seed)
    with pytest.raises(ValueError, match="32 bytes"):
        throw(seed, "r", 0)
    with pytest.raises(ValueError, match="32 bytes"):
        throw_trace(seed, "r", 0)
    with pytest.raises(ValueError, match="32 bytes"):
        byte_stream(seed, b"m")
    with pytest.raises(ValueError, match="32 bytes"):
        Sampler(seed, b"m")


@pytest.mark.parametrize("seed", [bytearray(32), "0" * 32, memoryview(bytes(32)), None])
def test_seed_must_be_bytes(seed: Any) -> None:
    with pytest.raises(ValueError):
        throw(seed, "r", 0)
    with pytest.raises(ValueError):
        commitment(seed)


@pytest.mark.parametrize("counter", [-1, True, 1.0, "1", None])
def test_bad_throw_counter_is_refused(counter: Any) -> None:
    with pytest.raises(ValueError, match="throw_counter"):
        throw(bytes(32), "r", counter)


def test_round_id_must_be_str() -> None:
    with pytest.raises(ValueError, match="round_id"):
        throw(bytes(32), b"r", 0)  # type: ignore[arg-type]


def test_messages_are_injective_on_awkward_round_ids() -> None:
    # Counters are digits, so the last newline always separates round id from counter.
    assert throw_message("a\n1", 2) != throw_message("a", 12)
    assert throw_message("a\n1", 2) != throw_message("a\n12", 0)
    assert throw(bytes(32), "a", 1) == throw(bytes(32), "a", 1)


# -- the general sampler --------------------------------------------------------------------


def test_stream_continues_block_by_block() -> None:
    seed = hashlib.sha256(b"stream").digest()
    message = b"casino-ledger/test/v1\nx"
    expected = b"".join(block(seed, message, i) for i in range(4))
    stream = byte_stream(seed, message)
    assert bytes(next(stream) for _ in range(128)) == expected


def test_sampler_rejects_past_the_last_full_multiple() -> None:
    """n = 129 keeps only bytes < 129, so about half are rejected and draws cross blocks."""
    seed = hashlib.sha256(b"sampler").digest()
    message = b"casino-ledger/test/v1\ny"
    raw = b"".join(block(seed, message, i) for i in range(8))
    sampler = Sampler(seed, message)
    draws = [sampler.below(129) for _ in range(60)]
    kept = [b for b in raw if b < 129][:60]
    assert draws == kept
    assert sampler.rejected == [i for i, b in enumerate(raw[: sampler.position]) if b >= 129]
    assert sampler.position > 64  # block 2 was reached
    assert list(zip(range(60), uniform(seed, message, 129), strict=False)) == list(enumerate(draws))


def test_sampler_uses_two_bytes_above_256() -> None:
    seed = hashlib.sha256(b"wide").digest()
    message = b"casino-ledger/test/v1\nz"
    raw = block(seed, message, 0)
    values = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, 32, 2)]
    limit = 65536 - 65536 % 1000
    sampler = Sampler(seed, message)
    expected = [v % 1000 for v in values if v < limit][:5]
    assert [sampler.below(1000) for _ in range(5)] == expected


def test_sampler_shuffles_a_deck() -> None:
    sampler = Sampler(hashlib.sha256(b"deck").digest(), b"casino-ledger/test/v1\ndeck")
    deck = list(range(52))
    for i in range(51, 0, -1):
        j = sampler.below(i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    assert sorted(deck) == list(range(52))
    assert deck != list(range(52))
    with pytest.raises(ValueError):
        sampler.below(0)


# -- uniformity ---------------------------------------------------------------------------

THROWS = 200_000
# Chi-square critical values at p = 0.001, used only when scipy is absent.
CRITICAL_0_001 = {5: 20.515, 13: 34.528, 15: 37.697, 35: 66.619}


def scipy_chisquare() -> Any:
    """scipy's chisquare, None without scipy: imported when a test first needs it,
    not by every test process as it collects the suite (0.9 s of CPU each)."""
    try:
        from scipy.stats import chisquare  # type: ignore[import-untyped, unused-ignore]
    except ImportError:  # pragma: no cover - scipy is installed in the dev venv
        return None
    return chisquare


def chi2_passes(observed: Sequence[int], expected: Sequence[float]) -> tuple[float, bool]:
    """(statistic, not rejected at p = 0.001) for a goodness-of-fit test."""
    assert sum(observed) == pytest.approx(sum(expected))
    chisquare = scipy_chisquare()
    if chisquare is not None:
        result = chisquare(observed, expected)
        return float(result.statistic), float(result.pvalue) > 0.001
    statistic = sum((o - e) ** 2 / e for o, e in zip(observed, expected, strict=True))
    return statistic, statistic < CRITICAL_0_001[len(observed) - 1]


@pytest.fixture(scope="module")
def throws() -> list[tuple[int, int, int]]:
    seed = hashlib.sha256(b"casino-ledger chi-square seed").digest()
    return [throw(seed, "chi-square", counter) for counter in range(THROWS)]


def test_faces_are_uniform(throws: list[tuple[int, int, int]]) -> None:
    faces = Counter(face for dice in throws for face in dice)
    observed = [faces[f] for f in range(1, 7)]
    statistic, ok = chi2_passes(observed, [3 * THROWS / 6] * 6)
    assert ok, (statistic, observed)


@pytest.mark.parametrize("first,second", [(0, 1), (1, 2), (0, 2)])
def test_dice_of_a_throw_are_independent(
    throws: list[tuple[int, int, int]], first: int, second: int
) -> None:
    pairs = Counter((dice[first], dice[second]) for dice in throws)
    observed = [pairs[cell] for cell in product(range(1, 7), range(1, 7))]
    statistic, ok = chi2_passes(observed, [THROWS / 36] * 36)
    assert ok, (statistic, observed)


def test_totals_follow_the_216_outcome_distribution(throws: list[tuple[int, int, int]]) -> None:
    ways = Counter(sum(d) for d in product(range(1, 7), repeat=3))
    totals = Counter(sum(d) for d in throws)
    # Pool 3 with 4 and 18 with 17 so every expected count is large.
    cells = [(3, 4), *((t,) for t in range(5, 17)), (17, 18)]
    observed = [sum(totals[t] for t in cell) for cell in cells]
    expected = [THROWS * sum(ways[t] for t in cell) / 216 for cell in cells]
    statistic, ok = chi2_passes(observed, expected)
    assert ok, (statistic, observed)


def test_the_test_catches_modulo_bias() -> None:
    """Without rejection (b % 6 on every byte) faces 1-4 get 43/256: the test must say so."""
    seed = hashlib.sha256(b"casino-ledger chi-square seed").digest()
    stream = byte_stream(seed, b"casino-ledger/test/v1\nbias")
    faces = Counter(next(stream) % 6 + 1 for _ in range(3 * THROWS))
    observed = [faces[f] for f in range(1, 7)]
    statistic, ok = chi2_passes(observed, [3 * THROWS / 6] * 6)
    assert not ok, (statistic, observed)
