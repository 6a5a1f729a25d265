"""The provably fair deck: known answers, an independent re-implementation from
the written spec, refusals, and a bounded uniformity test over card positions."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import ledger.rng
from ledger.rng.deck import deck_message, shuffle_trace, shuffled_deck, verify_cards
from ledger.rng.dice import commitment, throw_message

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(ledger.rng.__file__).parent / "deck_vectors.json").read_text(encoding="utf-8")
)["vectors"]
DOMAIN = b"casino-ledger/deck/v1\n"


def spec_deck(seed: bytes, round_id: str, *, reject: bool = True) -> list[int]:
    """The shuffle re-implemented here from the module docstring, with the stdlib only
    (`reject=False` is the naive, modulo-biased shuffle the spec forbids)."""
    message = DOMAIN + round_id.encode("utf-8")
    stream = b"".join(
        hmac.new(seed, message + b"\n" + str(i).encode(), hashlib.sha256).digest() for i in range(4)
    )
    deck, position = list(range(52)), 0
    for i in range(51, 0, -1):
        n = i + 1
        while True:
            b = stream[position]
            position += 1
            if not reject or b < 256 - 256 % n:
                break
        j = b % n
        deck[i], deck[j] = deck[j], deck[i]
    return deck


# -- known answers -------------------------------------------------------------------------


def test_vectors_cover_rejection_and_odd_round_ids() -> None:
    assert len(VECTORS) >= 8
    assert all(v["rejected_positions"] for v in VECTORS)  # a shuffle almost always rejects
    assert max(len(v["rejected_positions"]) for v in VECTORS) >= 5
    assert {"", "a\nb", "bàn-3/ván-42"} <= {v["round_id"] for v in VECTORS}


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["note"])
def test_vector(vector: dict[str, Any]) -> None:
    seed = bytes.fromhex(vector["seed"])
    round_id = vector["round_id"]
    assert commitment(seed) == vector["commitment"]
    assert shuffled_deck(seed, round_id) == vector["deck"]
    trace = shuffle_trace(seed, round_id)
    assert list(trace.swaps) == vector["swaps"]
    assert trace.bytes_read == vector["bytes_read"] == 51 + len(vector["rejected_positions"])
    assert list(trace.rejected_positions) == vector["rejected_positions"]
    assert (deck_message(round_id) + b"\n0").hex() == vector["block0_message_hex"]
    assert verify_cards(seed, round_id, [0, 51, 7], [vector["deck"][p] for p in (0, 51, 7)])


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: v["note"])
def test_vector_from_raw_hmac(vector: dict[str, Any]) -> None:
    """The recorded deck is the spec's, recomputed here without ledger.rng."""
    seed = bytes.fromhex(vector["seed"])
    assert spec_deck(seed, vector["round_id"]) == vector["deck"]
    message = DOMAIN + vector["round_id"].encode()
    stream = b"".join(
        hmac.new(seed, message + b"\n" + str(i).encode(), "sha256").digest() for i in range(3)
    )
    # Each rejected byte really is at or above its draw's limit.
    position, rejected = 0, []
    for i in range(51, 0, -1):
        while stream[position] >= 256 - 256 % (i + 1):
            rejected.append(position)
            position += 1
        position += 1
    assert rejected == vector["rejected_positions"]


def test_rejection_changes_the_deck() -> None:
    """Without rejection the same stream gives another deck: the vectors pin the retry."""
    for vector in VECTORS:
        seed = bytes.fromhex(vector["seed"])
        assert spec_deck(seed, vector["round_id"], reject=False) != vector["deck"]


def test_independent_implementation_agrees_on_many_rounds() -> None:
    seed = hashlib.sha256(b"deck agreement").digest()
    for k in range(300):
        assert shuffled_deck(seed, f"r{k}") == spec_deck(seed, f"r{k}")


# -- what a deck is, and what it is bound to ----------------------------------------------


def test_a_deck_is_a_permutation_bound_to_seed_and_round() -> None:
    seed = hashlib.sha256(b"bound").digest()
    deck = shuffled_deck(seed, "r")
    assert sorted(deck) == list(range(52))
    assert shuffled_deck(seed, "r") == deck
    assert shuffled_deck(seed, "r2") != deck
    assert shuffled_deck(b"\x01" + seed[1:], "r") != deck
    # Another domain than the dice: the deck's stream is not a throw's.
    assert deck_message("r") != throw_message("r", 0)[: len(deck_message("r"))]


def test_verify_cards_rejects_every_wrong_claim() -> None:
    seed = hashlib.sha256(b"claims").digest()
    deck = shuffled_deck(seed, "r")
    assert verify_cards(seed, "r", [0, 1], deck[:2])
    assert not verify_cards(seed, "r", [0, 1], [deck[1], deck[0]])
    assert not verify_cards(seed, "r", [0], deck[:2])
    assert not verify_cards(seed, "r", [52], [deck[0]])
    assert not verify_cards(seed, "r", [-1], [deck[51]])
    assert not verify_cards(seed, "r", [True], [deck[1]])  # a bool is not a position
    # The claim binds the round: another round's deck differs at some position.
    other = shuffled_deck(seed, "r2")
    p = next(p for p in range(52) if other[p] != deck[p])
    assert not verify_cards(seed, "r2", [p], [deck[p]])


@pytest.mark.parametrize("length", [0, 16, 31, 33])
def test_seed_not_32_bytes_is_refused(length: int) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        shuffled_deck(bytes(length), "r")


def test_round_id_must_be_str() -> None:
    with pytest.raises(ValueError, match="round_id"):
        shuffled_deck(bytes(32), b"r")  # type: ignore[arg-type]


# -- uniformity ---------------------------------------------------------------------------

SHUFFLES = 20_000


def positions_pass(shuffle: Callable[[str], list[int]], positions: tuple[int, ...]) -> list[float]:
    """p-values of a chi-square test, per deck position, that every card is equally
    likely there (52 cells, SHUFFLES / 52 ~ 385 expected per cell). scipy is
    imported here, not by every test process as it collects the suite."""
    try:
        from scipy.stats import chisquare  # type: ignore[import-untyped, unused-ignore]
    except ImportError:  # pragma: no cover - scipy is in the dev extras
        chisquare = None
    assert chisquare is not None, "scipy is in the dev extras"
    counts = {p: [0] * 52 for p in positions}
    for k in range(SHUFFLES):
        deck = shuffle(f"chi-square-{k}")
        for p in positions:
            counts[p][deck[p]] += 1
    return [float(chisquare(counts[p]).pvalue) for p in positions]


# The top and bottom cards and a middle one; 51 is where the largest draw
# (j in [0, 51], the biggest modulo bias if rejection were skipped) lands.
POSITIONS = (0, 1, 25, 50, 51)


def test_every_card_is_equally_likely_at_each_position() -> None:
    seed = hashlib.sha256(b"casino-ledger deck chi-square seed").digest()
    pvalues = positions_pass(lambda r: shuffled_deck(seed, r), POSITIONS)
    # Bonferroni over the positions tested, at a family-wise 0.001.
    assert min(pvalues) > 0.001 / len(POSITIONS), pvalues


def test_the_test_catches_modulo_bias() -> None:
    """The naive shuffle (b % n on every byte) gives cards 0..47 5/256 and 48..51 4/256
    at the bottom: the same test must say so."""
    seed = hashlib.sha256(b"casino-ledger deck chi-square seed").digest()
    pvalues = positions_pass(lambda r: spec_deck(seed, r, reject=False), POSITIONS)
    assert min(pvalues) < 0.001 / len(POSITIONS), pvalues
