"""What the HTTP layer asks of the hosted mode, without HTTP: open a tenant's session, admit a
new one under its plan, create it from a repository source, and measure the tenant's usage."""

from __future__ import annotations

import datetime
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kestrel.delivery.forges import ForgeSettings
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import ContextAdded
from kestrel.server.accounts import AccountStore, Principal, UnknownTenant
from kestrel.server.follow import OutageTolerant, published
from kestrel.server.intake import GitUrl, RepositorySource, materialize
from kestrel.server.intake_hosts import check_git_host
from kestrel.server.interfaces import HostedLog, SessionRuns
from kestrel.server.memory import HostedMemory, repository_key
from kestrel.server.plans import (
    DEFAULT_PLANS,
    FREE,
    Plan,
    Refused,
    TenantUsage,
    admit,
    session_caps,
)
from kestrel.server.registry import Hosted, Registry
from kestrel.server.spend import spent_since
from kestrel.server.sql import Database
from kestrel.server.workers import Pool
from kestrel.service.events import Fanout, carrier_from_env
from kestrel.service.session_process import ENV_PASSED
from kestrel.service.sessions import NewSession, create_session
from kestrel.settings import Settings
from kestrel.settings_load import load_settings


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """How `kestrel serve` runs."""

    data_dir: Path
    workers: int = 2
    allowed_roots: tuple[Path, ...] = ()
    """Local folders a session may be created from (`{"path": ...}`); none by default."""
    scripted_models_dir: Path | None = None
    """Where `scripted:` model files may be read from (tests and demos); None refuses them."""
    max_body_bytes: int = 50 * 1024 * 1024
    allowed_git_hosts: tuple[str, ...] = ()
    """Hosts (globs) git URLs may name though they resolve to private or local addresses."""
    min_free_bytes: int = 256 * 1024 * 1024
    """New sessions are refused (503) while the data folder's disk has less room than this."""
    plans: dict[str, Plan] = field(default_factory=lambda: dict(DEFAULT_PLANS))
    allow_http_git: bool = False
    """Accept plain http:// git URLs (a git server on a network the operator trusts)."""
    forge: ForgeSettings | None = None
    """The forge pull requests go to, with the server's token; None: from the server's
    environment when it starts (`KESTREL_FORGE_API`, `KESTREL_FORGE_TOKEN`, ...)."""
    store_url: str | None = None
    """Cluster mode: the PostgreSQL database every server and worker shares (the log, the
    server's tables and the queue); None: SQLite files in `data_dir` and a pool of workers in
    this process."""


class Refusal(Exception):
    """A request the server refuses, with its HTTP status and a message for the person."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


@dataclass(slots=True)
class Hosting:
    """The server's state: stores, registry, accounts and what runs the sessions."""

    config: ServerConfig
    store: HostedLog
    registry: Registry
    accounts: AccountStore
    pool: SessionRuns
    fanout: Fanout
    memory: HostedMemory
    shared: Database | None = None
    """Cluster mode: the database of the server's tables, shared with every other server."""

    @classmethod
    def open(cls, config: ServerConfig) -> Hosting:
        """Open (or create) everything: under the data directory, or in the cluster's database
        when `store_url` names one."""
        config.data_dir.mkdir(parents=True, exist_ok=True)
        if config.store_url is not None:
            return cls._open_cluster(config, config.store_url)
        from kestrel.archive.restore import Restorer
        from kestrel.store import STORE_FILE_NAME
        from kestrel.store.sqlite import SQLiteStore

        # An archived session is restored the first time a route reads it.
        store = published(
            SQLiteStore(config.data_dir / STORE_FILE_NAME, restorer=Restorer(config.data_dir)),
            os.environ,
        )
        registry = Registry(config.data_dir / "server.db")
        accounts = AccountStore(config.data_dir / "accounts.db")

        def plan_of(tenant: str) -> Plan:
            # A tenant removed, or on a plan no longer configured, gets the free plan's limits.
            try:
                return _plan(config, accounts.tenant(tenant).plan)
            except (Refusal, UnknownTenant):
                return config.plans.get("free", FREE)

        pool = Pool(
            registry,
            store,
            config.data_dir,
            config.workers,
            max_running=lambda tenant: plan_of(tenant).max_concurrent_sessions,
            max_wall_s=lambda tenant: plan_of(tenant).max_wall_s,
        )
        memory = HostedMemory(config.data_dir / "memory.db")
        fanout = Fanout(store, carrier=carrier_from_env(os.environ))
        return cls(config, store, registry, accounts, pool, fanout, memory)

    @classmethod
    def _open_cluster(cls, config: ServerConfig, url: str) -> Hosting:
        """Everything in the cluster's database; runs go to its queue."""
        from kestrel.archive.restore import Restorer
        from kestrel.cluster.submit import Cluster
        from kestrel.server.cluster_mode import ClusterRuns
        from kestrel.server.sql_pg import open_database
        from kestrel.store.postgres import PostgresStore

        shared = open_database(url)
        # A request never waits through an outage: it is answered 503 and sent again.
        store = published(
            PostgresStore(url, connect_timeout_s=3.0, restorer=Restorer(config.data_dir)),
            os.environ,
        )
        try:
            registry = Registry(shared)
            accounts = AccountStore(shared)
            memory = HostedMemory(shared)
            runs = ClusterRuns(registry, store, Cluster(url))
        except BaseException:
            store.close()
            shared.close()
            raise
        fanout = Fanout(OutageTolerant(store), carrier=carrier_from_env(os.environ))
        return cls(config, store, registry, accounts, runs, fanout, memory, shared)

    def close(self) -> None:
        """Close the stores."""
        self.store.close()
        self.registry.close()
        self.accounts.close()
        self.memory.close()

    def ready(self) -> None:
        """Reach the registry's database and the event log now, or raise (`StoreError`)."""
        self.registry.ping()
        self.store.last_seqs([])

    def plan_of(self, who: Principal) -> Plan:
        """The plan of the principal's tenant."""
        return _plan(self.config, who.plan)

    def session(self, who: Principal, session_id: str) -> Hosted:
        """The tenant's session; 404 for a missing one and for another tenant's alike."""
        hosted = self.registry.get(who.tenant_id, session_id)
        if hosted is None:
            raise Refusal(404, f"no session {session_id}")
        return hosted

    def usage(self, who: Principal) -> TenantUsage:
        """The tenant's sessions running and queued, and its spend since local midnight."""
        running, queued = self.registry.counts(who.tenant_id)
        midnight = _midnight()
        ids = [hosted.session_id for hosted in self.registry.of_tenant(who.tenant_id)]
        tokens, usd = spent_since(self.store, ids, midnight)
        left = midnight + 86_400 - time.time()
        return TenantUsage(
            running=running,
            queued=queued,
            tokens_today=tokens,
            usd_today=usd,
            seconds_until_day_resets=max(left, 1.0),
        )

    def create(
        self, who: Principal, task: str, source: RepositorySource, flags: dict[str, object]
    ) -> Hosted:
        """Admit, make the checkout, log the session's start, and queue its first run."""
        model = str(flags.get("model") or "") or self._default_model()
        self._admit(who, model)  # Refused before any clone or unpacking.
        self._check_room()
        if isinstance(source, GitUrl):
            check_git_host(source.url, self.config.allowed_git_hosts)
        checkout = self.config.data_dir / "checkouts" / uuid.uuid4().hex
        checkout.parent.mkdir(parents=True, exist_ok=True)
        try:
            materialize(
                source,
                checkout,
                allowed_roots=self.config.allowed_roots,
                allow_http=self.config.allow_http_git,
            )
            settings = self._settings(checkout, flags)
            # Admitted again under the tenant's lock (every server's, in cluster mode), with the
            # model the repository's own settings may have chosen: two requests at once cannot
            # both take the last slot.
            with self.registry.database.locked(f"admit:{who.tenant_id}"):
                usage = self._admit(who, settings.model)
                settings = _capped(settings, session_caps(self.plan_of(who), usage))
                new = NewSession(
                    task=task,
                    cwd=checkout,
                    plan_first=bool(flags.get("plan_first")),
                    user_memory=False,
                )
                session_id = create_session(self.store, settings, new)
                self._remember(who, session_id, repository_key(source))
                hosted = Hosted(
                    session_id=session_id,
                    tenant_id=who.tenant_id,
                    user_id=who.user_id,
                    tier=self.plan_of(who).tier,
                    checkout=checkout,
                    status="queued",
                    next_message=None,
                    created_at=time.time(),
                )
                self.registry.add(hosted)
        except BaseException:
            shutil.rmtree(checkout, ignore_errors=True)
            self._check_room()  # A clone or a write that failed for want of room says so.
            raise
        self.pool.submit(hosted)
        return hosted

    def _remember(self, who: Principal, session_id: str, repository: str) -> None:
        """Give a new session its tenant's entries for its repository, before it first runs."""
        self.memory.remember_session(who.tenant_id, session_id, repository)
        learned = self.memory.context(who.tenant_id, repository)
        if learned:
            self.store.append(session_id, ContextAdded(source="memory", text=learned))

    def _check_room(self) -> None:
        free = shutil.disk_usage(self.config.data_dir).free
        if free < self.config.min_free_bytes:
            mb = 1024 * 1024
            kept = self.config.min_free_bytes // mb
            said = f"{free // mb} MB left, under the {kept} MB it keeps free"
            raise Refusal(
                503,
                f"the server cannot start sessions now: its disk is full ({said}); try again later",
                {"Retry-After": "300"},
            )

    def _admit(self, who: Principal, model: str) -> TenantUsage:
        self._check_model(model)
        usage = self.usage(who)
        decision = admit(self.plan_of(who), usage, model=model)
        if isinstance(decision, Refused):
            raise Refusal(decision.status, decision.message, decision.headers)
        return usage

    def _settings(self, checkout: Path, flags: dict[str, object]) -> Settings:
        known = {k: v for k, v in flags.items() if k != "plan_first"}
        home = self.config.data_dir / "home"
        try:
            return load_settings(checkout, env=self._env(), flags=known, home=home)
        except ConfigError as exc:
            # Said without the server's folders, and without advice only its operator can take.
            said = str(exc).replace(f"{checkout}/", "").replace(str(checkout), "the repository")
            said = said.split(", which a repository's settings may not set")[0]
            raise Refusal(400, f"the session cannot start: {said}") from None

    def _default_model(self) -> str:
        home = self.config.data_dir / "home"
        return load_settings(self.config.data_dir, env=self._env(), flags={}, home=home).model

    def _check_model(self, model: str) -> None:
        if not model.startswith("scripted:"):
            return
        allowed = self.config.scripted_models_dir
        path = Path(model.removeprefix("scripted:")).resolve()
        if allowed is None or not path.is_relative_to(allowed.resolve()):
            raise Refusal(403, "scripted models are not enabled on this server")

    def _env(self) -> dict[str, str]:
        return server_env(self.config)


def server_env(config: ServerConfig) -> dict[str, str]:
    """The environment of the server's own `kestrel` commands and settings: what a session's
    process may see, the data folder, and in cluster mode the cluster's database."""
    env = {k: v for k, v in os.environ.items() if k in ENV_PASSED}
    env["KESTREL_DATA_DIR"] = str(config.data_dir)
    if config.store_url is not None:
        env["KESTREL_STORE_URL"] = config.store_url
    return env


def _plan(config: ServerConfig, name: str) -> Plan:
    plan = config.plans.get(name)
    if plan is None:
        raise Refusal(403, f"the tenant's plan {name!r} is not configured on this server")
    return plan


def _capped(settings: Settings, caps: dict[str, float]) -> Settings:
    """The settings with each budget no larger than its cap (the plan's)."""
    limits = settings.limits
    lower = {
        key: cap if getattr(limits, key) is None else min(getattr(limits, key), cap)
        for key, cap in caps.items()
    }
    if "max_tokens" in lower:
        lower["max_tokens"] = int(lower["max_tokens"])
    return settings.model_copy(update={"limits": limits.model_copy(update=lower)})


def _midnight() -> float:
    now = datetime.datetime.now().astimezone()
    return now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
