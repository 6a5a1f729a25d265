"""What the routes call: the casino on an open ledger, its RNG and the tokens,
kept on the app (`app.state.service`) and handed to each route by
`ledger.http.dependencies`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ledger.casino import Casino
from ledger.crypto.keys import Role
from ledger.http.models import ActorSignature
from ledger.http.signers import PresignedSigner
from ledger.http.tokens import TokenStore
from ledger.plugins.registry import LoadedGame
from ledger.projections import ProjectionRunner
from ledger.rng.server import RngServer
from ledger.store.application import LedgerApplication


@dataclass
class Service:
    """The casino on an open ledger, its RNG, the tokens."""

    app: LedgerApplication
    games: Mapping[str, LoadedGame]
    rng: RngServer
    tokens: TokenStore

    def __post_init__(self) -> None:
        self.casino = Casino(self.app, self.games)

    def operator(self, signed: ActorSignature) -> PresignedSigner:
        """The operator's signature sent with a command, checked when the casino signs."""
        return PresignedSigner(
            self.app.current_keyring(), signed.key_id, signed.signature, Role.OPERATOR
        )

    def catch_up(self) -> None:
        """Bring the projections up to date (they hold only what the log says)."""
        runner = ProjectionRunner(self.app)
        if not runner.is_built() or runner.status().behind:
            runner.catch_up()
