"""What the routes call: the casino on an open ledger, its RNG and the tokens,
kept on the app (`app.state.service`) and handed to each route by
`ledger.http.dependencies`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import InitVar, dataclass, field
from typing import TYPE_CHECKING

from ledger.casino import Casino
from ledger.crypto.keys import Role
from ledger.http.models import ActorSignature
from ledger.http.signers import PresignedSigner
from ledger.http.tokens import TokenStore
from ledger.plugins.registry import LoadedGame
from ledger.projections import ProjectionRunner
from ledger.rng.server import RngServer
from ledger.store.application import LedgerApplication

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger


@dataclass
class Service:
    """The casino on an open ledger, its RNG, the tokens."""

    app: LedgerApplication
    games: Mapping[str, LoadedGame]
    rng: RngServer
    tokens: TokenStore
    given_casino: InitVar[Casino | None] = None  # an opened ledger's (`of`)
    casino: Casino = field(init=False)

    def __post_init__(self, given_casino: Casino | None) -> None:
        self.casino = given_casino if given_casino is not None else Casino(self.app, self.games)

    @classmethod
    def of(cls, ledger: Ledger, rng: RngServer, tokens: TokenStore) -> Service:
        """The service over an opened ledger (`ledger.casino.open_ledger`): the
        same node, games and Python API the CLI's commands are handed."""
        return cls(ledger.node.app, ledger.games, rng, tokens, ledger.casino)

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
