"""`ledger serve`: the HTTP API (ledger.http) under uvicorn; `ledger openapi`:
its OpenAPI document; `ledger tokens create|revoke|list`: who may call it."""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ledger.cli.args import SELF_VERIFY_DEFAULT, int_range
from ledger.cli.common import WithLedger
from ledger.cli.self_verify import add_self_verify_option, announce
from ledger.domain.api_roles import ApiRole
from ledger.errors import ConfigError, NotFoundError
from ledger.inputs import existing_directory, output_file

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger
    from ledger.crypto.keystore import KeyDirectory
    from ledger.http.side_process import SideProcess
    from ledger.http.tokens import TokenStore


def cmd_openapi(args: argparse.Namespace) -> int:
    from ledger.http.app import openapi_document

    output = output_file(args.output, "write the OpenAPI document to") if args.output else None
    text = json.dumps(openapi_document(), indent=2, sort_keys=True) + "\n"
    if output is not None:
        output.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Check everything a worker will need (one line, exit 2, before any starts),
    hand it on in the environment, then run the workers beside the node's writer
    and anchor processes."""
    from ledger.http.tokens import TokenStore

    args.self_verify_every = _self_verify_every(args)
    directory = _prepare(args)
    if not TokenStore(directory.path).list():
        print(
            "no API tokens yet: create one with `ledger tokens create --role ROLE`",
            file=sys.stderr,
        )
    print(
        f"serving the ledger API on http://{args.host}:{args.port}/v1 "
        f"({args.workers} worker{'s' * (args.workers != 1)}; OpenAPI at /openapi.json)",
        file=sys.stderr,
        flush=True,
    )
    if args.self_verify_every:
        announce(args.self_verify_every)
    ended = _run(args, writable=not args.read_only)
    if ended > 0:  # it said why when it stopped (its "anchoring stopped: ..." line)
        print(
            f"ledger: the log was not anchored after the anchor process stopped (exit {ended})",
            file=sys.stderr,
        )
        return ended
    return 0


def _self_verify_every(args: argparse.Namespace) -> int:
    """The self-verification's period in seconds (0: off). A read-only node holds
    no ledger-node key to record its runs with: off, and refused when asked for."""
    given = args.self_verify_every
    if args.read_only:
        if given:
            raise ConfigError(
                "--self-verify-every: a --read-only node records nothing, its runs included"
            )
        return 0
    return SELF_VERIFY_DEFAULT if given is None else int(given)


def _prepare(args: argparse.Namespace) -> KeyDirectory:
    """The settings checked and handed to the workers in the environment; the
    ledger opened once here, so a wrong passphrase, a missing key, an unusable
    store or a broken plugin is one line before any worker starts."""
    from ledger.casino import open_ledger
    from ledger.cli.passphrase import read_passphrase
    from ledger.crypto.keystore import keys_dir
    from ledger.http import asgi
    from ledger.node import PASSPHRASE_ENV, refuse_new_keys_beside_events
    from ledger.store.application import probe_store
    from ledger.store.config import store_url

    directory = keys_dir(args.keys)
    rng_dir = Path(args.rng_dir) if args.rng_dir else asgi.default_rng_dir()
    if rng_dir.exists() and not rng_dir.is_dir():
        raise ConfigError(f"--rng-dir {rng_dir} is not a directory (RNG seeds are kept there)")
    if args.tiles is not None:
        try:
            tiles = existing_directory(args.tiles, "--tiles")
        except ConfigError as exc:
            raise ConfigError(f"{exc} (write it with `ledger tiles DIR`)") from None
        os.environ[asgi.TILES_ENV] = str(tiles.resolve())
    check_listen(args.host, args.port)
    probe_store(store_url(args.store))  # an unusable store fails before keys are made
    os.environ[asgi.PEERS_ENV] = peers_address(args.peers, store_url(args.store))
    writable = not args.read_only
    if writable and not directory.has_node_keys():
        refuse_new_keys_beside_events(args.store, directory)
    if writable and not args.unencrypted and asgi.passphrase() is None:
        # Every worker needs the ledger-node key: read the passphrase once, hand it on.
        os.environ[PASSPHRASE_ENV] = read_passphrase(confirm=not directory.has_node_keys()).decode()
    if writable and not directory.has_node_keys():  # one command on a new machine, as simulate
        for record in directory.create_node_keys(asgi.passphrase()):
            print(f"created {record.role.value} key {record.name} in {directory.path}")
    if not writable:
        # A copy (a mirror's store): no signing key, no anchor; a write is refused.
        os.environ[asgi.READ_ONLY_ENV] = "1"
        os.environ[asgi.ANCHOR_ENV] = "0"
    # The workers read their settings from the environment (each opens its own node).
    if args.store:
        os.environ[asgi.STORE_ENV] = args.store
    os.environ["LEDGER_KEYS"] = str(directory.path)
    os.environ[asgi.RNG_ENV] = str(rng_dir)
    if args.workers > 1:
        os.environ[asgi.SUPERVISOR_ENV] = str(os.getpid())  # they stop when this process does
    with open_ledger(
        args.store,
        str(directory.path),
        passphrase=asgi.passphrase(),
        anchor_seconds=0,
        writable=writable,
    ) as ledger:
        ledger.games  # noqa: B018 (loading them is the check)
        if writable:  # a release that strands or re-judges recorded rounds serves nothing
            from ledger.cli.games_check import check_before_serving

            check_before_serving(ledger)
    return directory


def _run(args: argparse.Namespace, *, writable: bool) -> int:
    """uvicorn's workers beside the writer and anchor processes, all stopped
    together; the anchor process's exit code (0 when none ran or it ended well)."""
    import tempfile

    import uvicorn

    from ledger.http import asgi

    with tempfile.TemporaryDirectory(prefix="ledger-serve-") as sockets:  # mode 0700
        anchor = None
        if writable and _anchors_apart():
            from ledger.http import anchor_process
            from ledger.store.sealed_rows import SEALED_ENV

            os.environ[asgi.ANCHOR_ENV] = "0"  # no worker does: the process below does
            # The rows the writer and the workers seal are told to it there.
            os.environ[SEALED_ENV] = str(Path(sockets) / "sealed.sock")
            anchor = anchor_process.start()
        writer = _start_writer(Path(sockets)) if writable else None
        checking = _start_self_verification(Path(sockets), args.self_verify_every)
        try:
            uvicorn.run(
                "ledger.http.asgi:build",
                factory=True,
                host=args.host,
                port=args.port,
                workers=args.workers,
                log_level=args.log_level,
            )
        finally:
            if checking is not None:
                checking.stop()
            if writer is not None:
                writer.stop()
            ended = anchor.stop() if anchor is not None else 0
    return ended


def _start_writer(directory: Path) -> SideProcess | None:
    """The node's writer process (`ledger.http.writer_process`), its socket named
    to the workers; None (the workers place bets themselves) when it did not start."""
    from ledger.http import asgi, writer_process

    path = directory / "writer.sock"
    writer = writer_process.start(path)
    if not writer.wait_ready():
        print("ledger: the writer process did not start: the workers place bets", file=sys.stderr)
        writer.stop()
        return None
    os.environ[asgi.WRITER_ENV] = str(path)
    return writer


def _start_self_verification(directory: Path, every: int) -> SideProcess | None:
    """The node's one self-verification process (none when off), its status file
    named to the workers for their health endpoint."""
    if not every:
        return None
    from ledger.audit.self_status import STATUS_FILE
    from ledger.http import self_verification_process
    from ledger.http.serve_settings import SELF_EVERY_ENV, SELF_STATUS_ENV

    status = directory / STATUS_FILE
    os.environ[SELF_STATUS_ENV] = str(status)
    os.environ[SELF_EVERY_ENV] = str(every)
    return self_verification_process.start(every, status)


def peers_address(given: str, url: str) -> str:
    """Where the writer takes other nodes' bets (`--peers`): on a PostgreSQL
    store by default a free port of the loopback interface (nodes on one
    machine); "off" on SQLite, whose nodes share one machine's file."""
    postgres = url.partition(":")[0] in ("postgresql", "postgres")
    if given == "auto":
        return "127.0.0.1:0" if postgres else "off"
    if given == "off":
        return given
    if not postgres:
        raise ConfigError("--peers: nodes hand each other bets on a PostgreSQL store only")
    host, _, port = given.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--peers {given!r}: give HOST:PORT (the address other nodes reach)")
    if host.strip("[]") in ("0.0.0.0", "::"):
        raise ConfigError(
            f"--peers {given!r}: give the address other nodes reach this one at, not a wildcard"
        )
    return given


def _anchors_apart() -> bool:
    """With anchoring on, the node anchors from a process of its own
    (`ledger.http.anchor_process`: one checkpointer for every worker, off the
    serving processes' GILs)."""
    from ledger.http import asgi
    from ledger.store.anchor import AnchorSettings

    if os.environ.get(asgi.ANCHOR_ENV, "1") == "0":
        return False
    return AnchorSettings.resolve(None, None).enabled


def check_listen(host: str, port: int) -> None:
    """The address resolves and the port is free: else one line now, rather
    than uvicorn's log (and its exit code 3) after "serving"."""
    import socket  # here: the commands that serve nothing never import it

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
        raise ConfigError(
            f"cannot serve on {host}:{port}: the host {host!r} does not resolve ({reason})"
        ) from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            reason = "the port is in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            raise ConfigError(f"cannot serve on {host}:{port}: {reason}") from None


def _expiry(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 time (e.g. 2027-01-31T18:00+00:00)"
        ) from None
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone (add +00:00 or Z)")
    return moment


def cmd_tokens(args: argparse.Namespace) -> int | WithLedger:
    from ledger.crypto.keystore import keys_dir
    from ledger.http.tokens import TokenStore

    store = TokenStore(keys_dir(args.keys).path)
    if args.tokens_command == "create":
        if args.table is not None and args.role == ApiRole.TABLE_DEVICE.value:
            # The table looked for in the store (the role's own checks come first:
            # TokenStore.create), then the token made.
            try:
                UUID(args.table)
            except ValueError:  # said before the store is opened (or the keys looked for)
                raise ConfigError(f"--table {args.table!r} is not a table id (a UUID)") from None
            return WithLedger(partial(_create_for_table, args, store))
        _create(args, store)
    elif args.tokens_command == "revoke":
        # Given the whole token text, its id: the secret is never echoed back.
        entry = store.revoke(args.token_id.partition(".")[0])
        print(f"token {entry.token_id} revoked at {entry.revoked_at}")
    else:
        for entry in store.list():
            state = "revoked" if entry.revoked_at else "active"
            print(
                f"{entry.token_id}  {entry.role.value:<12} {state:<8} "
                f"table={entry.table or '-'}  expires={entry.expires_at or 'never'}  "
                f"created={entry.created_at}"
            )
    return 0


def _create(args: argparse.Namespace, store: TokenStore) -> int:
    text, entry = store.create(ApiRole(args.role), table=args.table, expires_at=args.expires)
    print(text)  # the only time it is shown: the file keeps its hash
    where = f" for table {entry.table}" if entry.table else ""
    until = f", expires {entry.expires_at}" if entry.expires_at else ""
    print(f"token {entry.token_id}: {entry.role.value}{where}{until}", file=sys.stderr)
    return 0


def _create_for_table(args: argparse.Namespace, store: TokenStore, ledger: Ledger) -> int:
    """A table-device token is for a table the store holds: else one line, no token."""
    from ledger.store.stream_ids import Kind, require_stream

    try:
        require_stream(ledger.node.app.tables, args.table, Kind.TABLE)
    except NotFoundError as exc:
        raise NotFoundError(f"--table: {exc}; no token created") from None
    return _create(args, store)


def add_serve_commands(commands: Any) -> None:
    serve = commands.add_parser("serve", help="serve the HTTP API (uvicorn)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int_range(1, 65535), default=8000)
    serve.add_argument("--workers", type=int_range(1, 64), default=1)
    serve.add_argument(
        "--tiles", metavar="DIR", help="serve this tiles directory read-only at /tlog/ (no token)"
    )
    serve.add_argument("--rng-dir", help="where RNG seeds are kept (default: <keys>/../rng-seeds)")
    serve.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    serve.add_argument(
        "--peers",
        default="auto",
        metavar="HOST:PORT",
        help="where this node's writer takes the bets other nodes on the PostgreSQL store "
        "hand it (default: a free loopback port; 'off': none)",
    )
    add_self_verify_option(serve, "the node")
    serve.add_argument("--unencrypted", action="store_true", help="the keys have no passphrase")
    serve.add_argument(
        "--read-only",
        action="store_true",
        help="serve a store without signing keys (a mirror's copy): reads only, writes refused",
    )
    serve.set_defaults(handler=cmd_serve)

    openapi = commands.add_parser("openapi", help="print the HTTP API's OpenAPI document")
    openapi.add_argument("--output", metavar="FILE", help="write it here (docs/openapi.json)")
    openapi.set_defaults(handler=cmd_openapi)

    tokens = commands.add_parser("tokens", help="API tokens for `ledger serve`").add_subparsers(
        dest="tokens_command", required=True
    )
    create = tokens.add_parser("create", help="create a token (printed once, stored as a hash)")
    create.add_argument("--role", required=True, choices=[r.value for r in ApiRole])
    create.add_argument("--table", help="a table-device token's table id")
    create.add_argument("--expires", type=_expiry, help="ISO 8601 time with a zone")
    create.set_defaults(handler=cmd_tokens)
    revoke = tokens.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("token_id")
    revoke.set_defaults(handler=cmd_tokens)
    tokens.add_parser("list", help="every token (id, role, state; never a secret)").set_defaults(
        handler=cmd_tokens
    )
